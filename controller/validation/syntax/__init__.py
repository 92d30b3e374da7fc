"""Stage ``syntax``: HAProxy's own line rules, conditional blocks, sections — then the
directive policy and the rule that every referenced file belongs to the file set.

The parsed form (:class:`ParsedConfig`) is left in ``StageContext.parsed`` for the later
stages; :func:`parse` can be used on its own (``htc lint``), and :func:`quote_word` is the
inverse of the tokenizer for writing untrusted values into a configuration.
"""

from controller.validation.keywords import SECTION_KEYWORDS
from controller.validation.parsed import Directive, ParsedConfig, Section, Token
from controller.validation.syntax.conditions import ConditionResult, evaluate
from controller.validation.syntax.filerefs import FileRef, Need, check_file_refs, file_references
from controller.validation.syntax.parser import parse
from controller.validation.syntax.policy import (
    ALLOW_NAMES,
    DENIED_DIRECTIVES,
    ENV_EXPANSION,
    Denial,
    check_policy,
    unknown_allow_names,
)
from controller.validation.syntax.stage import SyntaxStage
from controller.validation.syntax.tokenizer import LineError, quote_word, tokenize

__all__ = [
    "ALLOW_NAMES",
    "DENIED_DIRECTIVES",
    "ENV_EXPANSION",
    "SECTION_KEYWORDS",
    "ConditionResult",
    "Denial",
    "Directive",
    "FileRef",
    "LineError",
    "Need",
    "ParsedConfig",
    "Section",
    "SyntaxStage",
    "Token",
    "check_file_refs",
    "check_policy",
    "evaluate",
    "file_references",
    "parse",
    "quote_word",
    "tokenize",
    "unknown_allow_names",
]
