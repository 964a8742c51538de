"""Where the tests find the repository, its examples and the committed fixtures (whatever
folder of tests/ a test module sits in)."""
import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
EXAMPLES = os.path.join(ROOT, "examples")
