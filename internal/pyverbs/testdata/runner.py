# Runs rdma-core's pyverbs test suite as its run_tests.py does and writes one
# JSON object per line to the file RESULTS for the Go test to read:
#   {"test": ID, "outcome": "pass"|"fail"|"error"|"skip"|"xfail"|"xpass", "reason": TEXT}
# and, once the suite has ended, {"end": true, "ran": N}. Output of the tests
# themselves goes to stdout and stderr as usual, apart from the results.
#
# usage: python3 runner.py TESTS_DIR RESULTS SEED [suite options: --dev vrdma0 ...]
#
# SEED seeds Python's random module before the suite runs: the suite draws
# QP types, attribute masks and sizes at random, and a fixed seed makes a
# run repeatable (the same seed gives the same draws for the same library).
import json
import os
import random
import sys
import traceback
import unittest
from importlib.machinery import SourceFileLoader

tests_dir, results_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.argv = [sys.argv[0]] + sys.argv[4:]
sys.path.insert(0, tests_dir)

out = open(results_path, "w", buffering=1)


def record(test, outcome, reason=""):
    out.write(json.dumps({"test": test.id(), "outcome": outcome, "reason": reason}) + "\n")


def why(err):
    """The exception's last line: its type and message."""
    lines = traceback.format_exception_only(err[0], err[1])
    return lines[-1].strip() if lines else ""


class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        record(test, "pass")

    def addError(self, test, err):
        super().addError(test, err)
        record(test, "error", why(err))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        record(test, "fail", why(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        record(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        record(test, "xfail", why(err))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        record(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            record(subtest, "fail" if failed else "error", why(err))


from args_parser import parser  # noqa: E402 (the suite's own, from tests_dir)

suite_module = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
parser.parse_args()
random.seed(seed)
prog = unittest.main(module=suite_module, exit=False,
                     testRunner=unittest.TextTestRunner(resultclass=Result, verbosity=2))
out.write(json.dumps({"end": True, "ran": prog.result.testsRun}) + "\n")
out.close()
