import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="module")
def session():
    """One ``fwport verify`` Session for the tests of a module: its framework workers stay warm between them."""
    from fwport.verify.run import Session

    with Session() as s:
        yield s
