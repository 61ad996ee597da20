"""Deprecated: moved to :mod:`rar.science.protocols.contract_net` (this name goes in RAR 0.2)."""

from typing import TYPE_CHECKING

from rar._moved import alias

if TYPE_CHECKING:
    from rar.science.protocols.contract_net import *  # noqa: F403
else:
    alias(__name__)  # the import of this module gives rar.science.protocols.contract_net itself
