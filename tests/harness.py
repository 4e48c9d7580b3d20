"""The Python tests' runner: tests/test_export.py and tests/test_train.py collect their tests with
`test`, raise Skip from one that does not apply to this run, and end in run_tests, which prints a
PASS, FAIL or SKIP line for each and the closing "N passed, N failed, N skipped" line that CI reads.
"""
import os
import shutil
import tempfile
import traceback


class Skip(Exception):
    """Raised by a test that does not apply to this run; reported as SKIP with its message."""


def collector(tests):
    """A decorator that appends each function it decorates to the list tests, in file order."""
    def test(fn):
        tests.append(fn)
        return fn
    return test


def scratch(prefix):
    """A new scratch directory for a test file (run_tests removes it) and a function that gives a
    name's path inside it."""
    path = tempfile.mkdtemp(prefix=prefix)
    return path, lambda name: os.path.join(path, name)


def run_tests(tests, tmp, skip_all=None):
    """Runs every test of the list, going on after a failure (its traceback printed, 3 frames),
    then removes the tests' scratch directory tmp. skip_all: a reason to skip every test, or None.
    Returns the exit status: 1 if a test failed, else 0."""
    passed = failed = skipped = 0
    for fn in tests:
        try:
            if skip_all:
                raise Skip(skip_all)
            fn()
            print(f"PASS {fn.__name__}")
            passed += 1
        except Skip as e:
            print(f"SKIP {fn.__name__}: {e}")
            skipped += 1
        except Exception as e:  # report every failure, keep going
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {str(e)[:500]}")
            traceback.print_exc(limit=3)
            failed += 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0
