"""The series names a PromQL expression reads (a small scanner for the dashboards' tests): string
literals, label matchers, ranges and the label lists of by/without/on/ignoring/group_left/right are
dropped; what is left that names no function, keyword or number is a series."""
import re

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def series(expr):
    text = re.sub(r'"(\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = LABEL_LISTS.sub(" ", text)
    out = set()
    for m in NAME.finditer(text):
        rest = text[m.end():].lstrip()
        if m.group(0) in KEYWORDS or rest.startswith("("):
            continue
        if m.start() and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # the unit of a duration or an exponent
        out.add(m.group(0))
    return out
