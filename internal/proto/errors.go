package proto

import (
	"errors"
	"fmt"
)

// Code classifies a failed command.
type Code uint16

const (
	CodeOK Code = iota
	CodeInvalid
	CodeNotFound
	CodeLimit
	CodeBusy
	CodeState
	CodeMemlock
	CodePermission
	CodeVersion
	CodeInternal
	CodeAttr // an attribute's value is out of range (CodeState: the transition or mask is wrong)
	codeMax
)

var codeNames = [...]string{"ok", "invalid argument", "not found", "limit reached", "in use",
	"invalid state transition", "cannot lock memory", "permission denied", "version mismatch", "internal error",
	"invalid attribute"}

// Valid reports whether c is a known code.
func (c Code) Valid() bool { return c < codeMax }

func (c Code) String() string {
	if c < codeMax {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Error is a failed command as the daemon reported it.
type Error struct {
	Op      Op
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("vrdma %v: %s", e.Op, e.Message) }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the Code of err: its own if it is an *Error, CodeInternal otherwise.
func CodeOf(err error) Code {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternal
}
