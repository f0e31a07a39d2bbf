"""fwport verify / fwport weights: prove a translation computes the same model.

The parent process (this package's run.py, cli.py, transfer.py) imports no framework; each framework
runs in its own subprocess (keras_side.py, torch_side.py) and arrays cross as ``.npz``.
"""
from fwport.verify.run import Options, Session, VerifyError, verify

__all__ = ["Options", "Session", "VerifyError", "verify"]
