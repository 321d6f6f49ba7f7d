"""Every template's tags are read as tags: none is left in the page as text.

Django reads ``{# … #}``, ``{% … %}`` and ``{{ … }}`` only within one line. A comment or tag
broken over two lines is no error: it is drawn into the page as written (a usage report once
showed its own template comment above the month field). Reading each template's text parts
with Django's own lexer finds every such one, whatever the tag.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.template.base import Lexer, TokenType

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))
OPENERS = ("{#", "{%", "{{")


def unread_tags(source: str) -> list[tuple[int, str]]:
    """(line, text) of each piece of ``source`` the lexer leaves as text but that opens a
    comment, a tag or a variable."""
    found = []
    for token in Lexer(source).tokenize():
        if token.token_type is not TokenType.TEXT:
            continue
        text = token.contents
        at = min((i for o in OPENERS if (i := text.find(o)) >= 0), default=-1)
        if at >= 0:
            found.append((token.lineno + text.count("\n", 0, at), text[at : at + 80].strip()))
    return found


def test_a_comment_over_two_lines_is_found():
    source = "<p>{# one line #}</p>\n{# two\nlines #}\n{% if x %}{{ x }}{% endif %}"
    assert unread_tags(source) == [(2, "{# two\nlines #}")]


def test_a_tag_over_two_lines_is_found():
    assert [line for line, _ in unread_tags("a\n{% if\nx %}b{% endif %}")] == [2]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_leaves_a_tag_as_text(path):
    assert unread_tags(path.read_text(encoding="utf-8")) == []
