// Package pyverbs runs rdma-core's own test suite, the Python tests of
// pyverbs (Debian's python3-pyverbs, rdma-core v44), on a vrdma adapter
// through `vrdma run`, as a user of a real device would run it, and checks
// how many of its tests pass.
//
// The suite is not in this repository: .ci/pyverbs-tests.sh fetches it from
// Debian into /var/tmp/vrdma-pyverbs/<version>/tests (VRDMA_PYVERBS_CACHE),
// and the test skips, saying how to get it, when it or python3-pyverbs is
// missing. testdata/runner.py runs the suite as its run_tests.py does, with
// a fixed seed for the suite's random draws, and writes each test's outcome
// as a JSON line; ParseResults reads them. docs/pyverbs.md sorts today's
// failures and skips by what they need.
package pyverbs
