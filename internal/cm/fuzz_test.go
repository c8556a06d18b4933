package cm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzParse: any bytes either decode to a message that encodes back to the
// same frame, or give a *ProtocolError; nothing panics.
func FuzzParse(f *testing.F) {
	for _, m := range messages() {
		f.Add(mustAppend(f, m))
	}
	f.Add([]byte{'v', 'C', 1, 1, 0xFF, 0xFF})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := Parse(b)
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ProtocolError", err)
			}
			return
		}
		if n < HeaderSize || n > len(b) || n > MaxFrame {
			t.Fatalf("Parse took %d of %d bytes", n, len(b))
		}
		again, err := m.Append(nil)
		if err != nil {
			t.Fatalf("a parsed %v does not encode: %v", m.Type(), err)
		}
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("%v re-encodes differently\n got %x\nwant %x", m.Type(), again, b[:n])
		}
		m2, _, err := Parse(again)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-parse: %+v, %v", m2, err)
		}
	})
}

// FuzzReadFrame reads frames from an arbitrary stream until it ends or a
// frame is refused, as the daemon's reader does.
func FuzzReadFrame(f *testing.F) {
	var stream []byte
	for _, m := range messages() {
		stream = append(stream, mustAppend(f, m)...)
	}
	f.Add(stream)
	f.Add(stream[:len(stream)-5])
	f.Add([]byte{'v', 'C', 1, 2, 0x02, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var buf [MaxFrame]byte
		for i := 0; ; i++ {
			m, err := ReadFrame(r, &buf)
			if err == io.EOF {
				return
			}
			if err != nil {
				var pe *ProtocolError
				if !errors.As(err, &pe) {
					t.Fatalf("frame %d: error %v is not a *ProtocolError", i, err)
				}
				return
			}
			if _, err := m.Append(nil); err != nil {
				t.Fatalf("frame %d: a read %v does not encode: %v", i, m.Type(), err)
			}
		}
	})
}
