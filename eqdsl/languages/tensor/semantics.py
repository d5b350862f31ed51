"""The tensor language's reference semantics as `eqdsl.verify.semantics` finds them: the `reference`
column of the operator table (`eqdsl.languages.tensor.ops`)."""
from eqdsl.languages.tensor.ops import SEMANTICS

__all__ = ["SEMANTICS"]
