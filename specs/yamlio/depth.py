"""A nesting-depth check that runs before any YAML is composed, so a nesting bomb (2,000
levels of `[[[[` in 4 KB) is refused for the price of a scan, not a parse.

The check is exact (it counts the parser's collection events, so quotes, comments and block
style are all handled as YAML handles them) and cheap: libyaml's event parser is C and keeps
no stack, and it is skipped entirely when the text has too few indicator characters to nest
that deep. It stops at the first collection past the limit.
"""

from __future__ import annotations

import yaml

# A Task nests a handful of levels (spec > runtimeEnv > env_vars); 64 leaves plenty of room
# for runtime_env configs while keeping every later recursive walk shallow.
MAX_NESTING = 64
# Every collection needs at least one of these characters to open it ('[', '{', or a block
# entry's '-', ':' or '?'), so their count bounds the depth from above.
_INDICATORS = "[{-:?"
_EventLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class TooDeep(ValueError):
    """Nesting deeper than the limit; line and column (1-based) of the first collection past it."""

    def __init__(self, limit: int, line: int, column: int) -> None:
        self.limit, self.line, self.column = limit, line, column
        super().__init__(
            f"nesting is deeper than {limit} levels (lists and mappings inside each other) "
            f"at line {line}, column {column}"
        )

    @property
    def reason(self) -> str:
        return f"nesting is deeper than {self.limit} levels (lists and mappings inside each other)"


def check_nesting(text: str | bytes, *, limit: int = MAX_NESTING) -> None:
    """Raise TooDeep if collections in `text` nest deeper than `limit`. A syntax error is not
    reported here: the parse that follows reports it, with its line, and cannot recurse deep
    on a document this check let through."""
    if isinstance(text, str):
        bound = sum(text.count(c) for c in _INDICATORS)
    else:
        bound = sum(text.count(c.encode()) for c in _INDICATORS)
    if bound <= limit:
        return  # the common small file: no scan at all
    depth = 0
    events = yaml.parse(text, Loader=_EventLoader)
    try:
        for event in events:
            if isinstance(event, _OPEN):
                depth += 1
                if depth > limit:
                    mark = event.start_mark
                    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
                    raise TooDeep(limit, line, column)
            elif isinstance(event, _CLOSE):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml's scanner looks ahead and has its own bound (1,000 flow levels): past it,
        # the same refusal, at the place it names.
        if "nesting depth" in str(exc.problem) and exc.problem_mark is not None:
            raise TooDeep(limit, exc.problem_mark.line + 1, exc.problem_mark.column + 1) from None
        return
    except yaml.YAMLError:
        return


__all__ = ["MAX_NESTING", "TooDeep", "check_nesting"]
