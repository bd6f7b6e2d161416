"""
grammar.py -- the statement parsers of the test engines (test/engines/server.py):
Spark SQL CALL of the Iceberg procedures (what Livy runs), Trino's ALTER TABLE
... EXECUTE, the partition predicate both of them take, and DELETE FROM name
WHERE predicate in both dialects (the predicate then judges rows; Spark's
TIMESTAMP_NTZ '...' literal besides DATE and TIMESTAMP).

Strict by design: exactly the procedures and named arguments the engines
document, failing the way they fail.  Sources (read, not copied):
  * Iceberg Spark procedures, https://iceberg.apache.org/docs/latest/spark-procedures/
    (arguments, their types, the output columns);
  * Spark SQL lexical rules: string literals in '...' or "..." with backslash
    escapes, adjacent literals concatenate; identifiers in `...` with ``
    for a backquote; a statement may end in ';' and nothing may follow;
  * Trino's Iceberg connector, https://trino.io/docs/current/connector/iceberg.html
    (ALTER TABLE EXECUTE optimize / optimize_manifests / expire_snapshots /
    remove_orphan_files), Trino SQL lexical rules: "..." identifiers with ""
    for a quote, '...' literals with '' for a quote, unquoted identifiers
    fold to lower case.

Errors are EngineError(kind, message, name): kind is the engine's class of
error (Spark: "org.apache.spark.sql.catalyst.parser.ParseException" or
"org.apache.spark.sql.AnalysisException"; Trino: its errorName, e.g.
SYNTAX_ERROR), message the text the engine would print.

The partition predicate (the Trino WHERE, the Spark `where` string):

    Predicate = Callable[[dict], bool]

A Predicate is called with partition_values: {partition field name: python
value} of one data file (as test/catalog/avro_codec.py decodes the
manifest's partition struct: int, str, float, bool, None; dates as days
since 1970-01-01, timestamps as microseconds since the epoch) and answers
whether the file's partition is selected.  SQL's three-valued logic is
applied (a comparison with NULL is unknown; unknown selects nothing).  A
name the dict does not have raises EngineError (the caller checks names
first with Predicate.columns).  compact.py relies on nothing else.

Rules: no I/O, no global state, bounded loops (every loop consumes input).
"""

import datetime
import re

SPARK_PARSE = "org.apache.spark.sql.catalyst.parser.ParseException"
SPARK_ANALYSIS = "org.apache.spark.sql.AnalysisException"
SPARK_ILLEGAL = "java.lang.IllegalArgumentException"


class EngineError(Exception):
    """kind: the engine's error class or name; message: its text."""

    def __init__(self, kind, message, code=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code


# ---------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------

class Timestamp:
    """A TIMESTAMP literal: .micros since the epoch (UTC), .text as written."""

    def __init__(self, text, micros):
        self.text = text
        self.micros = micros

    def __repr__(self):
        return "TIMESTAMP %r" % self.text


class Date:
    def __init__(self, text, days):
        self.text = text
        self.days = days


TS_RE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
                   r"\s*(Z|UTC|[+-]\d{2}:?\d{2})?\s*$")


def parse_timestamp(text):
    """Microseconds since the epoch of 'YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|+hh:mm]'
    (no zone: UTC, the test engines' session time zone); None if malformed."""
    m = TS_RE.match(text)
    if not m:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        dt = datetime.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0),
                               tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    micros = int((frac or "0").ljust(6, "0")[:6])
    off = 0
    if zone and zone not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        z = zone[1:].replace(":", "")
        off = sign * (int(z[:2]) * 3600 + int(z[2:]) * 60)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return ((dt - epoch) // datetime.timedelta(seconds=1) - off) * 1000000 + micros


def parse_date(text):
    try:
        d = datetime.date.fromisoformat(text.strip())
    except ValueError:
        return None
    return (d - datetime.date(1970, 1, 1)).days


# ---------------------------------------------------------------------------
# lexers
# ---------------------------------------------------------------------------

class Tok:
    __slots__ = ("kind", "value", "pos", "text")

    def __init__(self, kind, value, pos, text):
        self.kind = kind        # ident, qident, string, number, op, eof
        self.value = value
        self.pos = pos
        self.text = text

    def __repr__(self):
        return "%s:%r" % (self.kind, self.value)


SPARK_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a",
                 "%": "\\%", "_": "\\_"}
OPS = ("=>", "<=", ">=", "<>", "!=", "==", "(", ")", ",", ".", ";", "=", "<", ">", "-", "+")


def _syntax(dialect, text, pos, what):
    if dialect == "spark":
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1)
        near = what if what else "end of input"
        raise EngineError(SPARK_PARSE,
                          "\n[PARSE_SYNTAX_ERROR] Syntax error at or near %s.(line %d, pos %d)\n"
                          % (near, line, col))
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    raise EngineError("SYNTAX_ERROR", "line %d:%d: %s" % (line, col, what), 1)


def lex(text, dialect):
    """Tokens of text in the dialect ("spark" or "trino")."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                _syntax(dialect, text, i, "'/*'" if dialect == "spark"
                        else "mismatched input '/*'")
            i = j + 2
            continue
        start = i
        if c == "'" or (c == '"' and dialect == "spark"):
            q = c
            buf = []
            i += 1
            closed = False
            while i < n:
                ch = text[i]
                if dialect == "spark" and ch == "\\" and i + 1 < n:
                    nx = text[i + 1]
                    if nx == "u" and re.match(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                        buf.append(chr(int(text[i + 2:i + 6], 16)))
                        i += 6
                        continue
                    buf.append(SPARK_ESCAPES.get(nx, nx))
                    i += 2
                    continue
                if ch == q:
                    if dialect == "trino" and i + 1 < n and text[i + 1] == q:
                        buf.append(q)
                        i += 2
                        continue
                    closed = True
                    i += 1
                    break
                buf.append(ch)
                i += 1
            if not closed:
                if dialect == "spark":
                    _syntax(dialect, text, start, "'%s'" % text[start:start + 20])
                _syntax(dialect, text, start, "mismatched input '%s'. Expecting: <expression>"
                        % q)
            out.append(Tok("string", "".join(buf), start, text[start:i]))
            continue
        iq = "`" if dialect == "spark" else '"'
        if c == iq:
            buf = []
            i += 1
            closed = False
            while i < n:
                if text[i] == iq:
                    if i + 1 < n and text[i + 1] == iq:
                        buf.append(iq)
                        i += 2
                        continue
                    closed = True
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            if not closed:
                _syntax(dialect, text, start, "'%s'" % text[start:start + 20] if dialect == "spark"
                        else "mismatched input '%s'" % iq)
            if not buf and dialect == "trino":
                _syntax(dialect, text, start, "Zero-length delimited identifier not allowed")
            out.append(Tok("qident", "".join(buf), start, text[start:i]))
            continue
        if c.isdigit():
            m = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?[LlDd]?").match(text, i)
            i = m.end()
            if i < n and (text[i].isalpha() or text[i] == "_"):
                _syntax(dialect, text, start, "'%s'" % text[start:i + 1])
            out.append(Tok("number", m.group(0), start, m.group(0)))
            continue
        if c.isalpha() or c == "_":
            m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, i)
            i = m.end()
            out.append(Tok("ident", m.group(0), start, m.group(0)))
            continue
        for op in OPS:
            if text.startswith(op, i):
                out.append(Tok("op", op, start, op))
                i += len(op)
                break
        else:
            _syntax(dialect, text, start, "'%s'" % c if dialect == "spark"
                    else "mismatched input '%s'" % c)
    out.append(Tok("eof", None, n, ""))
    return out


class Parser:
    def __init__(self, text, dialect):
        self.text = text
        self.dialect = dialect
        self.toks = lex(text, dialect)
        self.i = 0

    @property
    def tok(self):
        return self.toks[self.i]

    def next(self):
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def fail(self, expecting=None):
        t = self.tok
        if self.dialect == "spark":
            _syntax("spark", self.text, t.pos, "'%s'" % t.text if t.kind != "eof" else None)
        shown = "<EOF>" if t.kind == "eof" else t.text
        msg = "mismatched input '%s'" % shown
        if expecting:
            msg += ". Expecting: %s" % expecting
        _syntax("trino", self.text, t.pos, msg)

    def is_kw(self, word):
        t = self.tok
        return t.kind == "ident" and t.value.upper() == word

    def kw(self, word):
        if not self.is_kw(word):
            self.fail("'%s'" % word)
        self.next()

    def is_op(self, op):
        return self.tok.kind == "op" and self.tok.value == op

    def op(self, op):
        if not self.is_op(op):
            self.fail("'%s'" % op)
        self.next()

    def ident(self):
        t = self.tok
        if t.kind == "qident":
            self.next()
            return t.value
        if t.kind == "ident":
            self.next()
            return t.value.lower() if self.dialect == "trino" else t.value
        self.fail("<identifier>")

    def end(self):
        """';'* EOF (Spark); Trino's client protocol takes one statement, no ';'."""
        if self.dialect == "spark":
            while self.is_op(";"):
                self.next()
        if self.tok.kind != "eof":
            self.fail("<EOF>")


# ---------------------------------------------------------------------------
# the predicate
# ---------------------------------------------------------------------------

class Predicate:
    """A parsed predicate; call it with partition values (see the header)."""

    def __init__(self, tree, text):
        self.tree = tree
        self.text = text
        self.columns = sorted(_columns(tree))

    def __call__(self, partition_values):
        return _eval(self.tree, partition_values) is True

    def __repr__(self):
        return "Predicate(%r)" % self.text


def _columns(node):
    if node[0] == "col":
        return {node[1]}
    out = set()
    for child in node[1:]:
        if isinstance(child, tuple):
            out |= _columns(child)
        elif isinstance(child, list):
            for c in child:
                out |= _columns(c)
    return out


def _value(node, row):
    if node[0] == "lit":
        return node[1]
    if node[0] == "col":
        if node[1] not in row:
            raise EngineError("COLUMN_NOT_FOUND", "Column '%s' cannot be resolved" % node[1])
        return row[node[1]]
    raise EngineError("TYPE_MISMATCH", "not a value: %r" % (node,))


def _cmp(op, a, b):
    if a is None or b is None:
        return None
    if isinstance(a, bool) != isinstance(b, bool) or \
            isinstance(a, str) != isinstance(b, str):
        raise EngineError("TYPE_MISMATCH", "Cannot apply operator: %r %s %r" % (a, op, b))
    if op in ("=", "=="):
        return a == b
    if op in ("<>", "!="):
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _eval(node, row):
    k = node[0]
    if k == "and":
        a, b = _eval(node[1], row), _eval(node[2], row)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if k == "or":
        a, b = _eval(node[1], row), _eval(node[2], row)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if k == "not":
        a = _eval(node[1], row)
        return None if a is None else not a
    if k == "cmp":
        return _cmp(node[1], _value(node[2], row), _value(node[3], row))
    if k == "isnull":
        v = _value(node[1], row) is None
        return not v if node[2] else v
    if k == "in":
        v = _value(node[1], row)
        if v is None:
            return None
        seen_null = False
        for item in node[2]:
            w = _value(item, row)
            if w is None:
                seen_null = True
            elif _cmp("=", v, w):
                return not node[3]
        if seen_null:
            return None
        return node[3]
    if k in ("lit", "col"):
        v = _value(node, row)
        if v is None or isinstance(v, bool):
            return v
        raise EngineError("TYPE_MISMATCH", "WHERE clause must evaluate to a boolean")
    raise EngineError("GENERIC_INTERNAL_ERROR", "bad predicate node %r" % (k,))


def _pred_or(p):
    left = _pred_and(p)
    while p.is_kw("OR"):
        p.next()
        left = ("or", left, _pred_and(p))
    return left


def _pred_and(p):
    left = _pred_not(p)
    while p.is_kw("AND"):
        p.next()
        left = ("and", left, _pred_not(p))
    return left


def _pred_not(p):
    if p.is_kw("NOT"):
        p.next()
        return ("not", _pred_not(p))
    return _pred_cmp(p)


CMP_OPS = ("=", "<>", "!=", "<", "<=", ">", ">=", "==")


def _pred_cmp(p):
    left = _pred_atom(p)
    if p.tok.kind == "op" and p.tok.value in CMP_OPS:
        if p.tok.value == "==" and p.dialect == "trino":
            p.fail("<expression>")
        op = p.next().value
        return ("cmp", op, left, _pred_atom(p))
    if p.is_kw("IS"):
        p.next()
        neg = False
        if p.is_kw("NOT"):
            p.next()
            neg = True
        p.kw("NULL")
        return ("isnull", left, neg)
    neg = False
    if p.is_kw("NOT"):
        p.next()
        neg = True
        if not p.is_kw("IN"):
            p.fail("'IN'")
    if p.is_kw("IN"):
        p.next()
        p.op("(")
        items = [_pred_atom(p)]
        while p.is_op(","):
            p.next()
            items.append(_pred_atom(p))
        p.op(")")
        return ("in", left, items, neg)
    return left


def _pred_atom(p):
    t = p.tok
    if p.is_op("("):
        p.next()
        e = _pred_or(p)
        p.op(")")
        return e
    if p.is_op("-") or p.is_op("+"):
        sign = -1 if p.next().value == "-" else 1
        if p.tok.kind != "number":
            p.fail("<number>")
        v = _number(p.next().value, p)
        return ("lit", sign * v)
    if t.kind == "number":
        return ("lit", _number(p.next().value, p))
    if t.kind == "string":
        return ("lit", _strings(p))
    if t.kind == "ident" and (t.value.upper() in ("DATE", "TIMESTAMP") or (
            p.dialect == "spark" and t.value.upper() == "TIMESTAMP_NTZ")) and \
            p.toks[p.i + 1].kind == "string":
        word = p.next().value.upper()
        if word == "TIMESTAMP_NTZ":
            s = _strings(p)
            ts = parse_timestamp(s)
            if ts is None or TS_RE.match(s).group(8):
                _bad_literal(p, t, word, s)     # NTZ: a zone is no part of it
            return ("lit", ts)
        s = _strings(p)
        if word == "DATE":
            d = parse_date(s)
            if d is None:
                _bad_literal(p, t, "DATE", s)
            return ("lit", d)
        ts = parse_timestamp(s)
        if ts is None:
            _bad_literal(p, t, "TIMESTAMP", s)
        return ("lit", ts)
    if t.kind == "ident" and t.value.upper() in ("TRUE", "FALSE"):
        p.next()
        return ("lit", t.value.upper() == "TRUE")
    if t.kind == "ident" and t.value.upper() == "NULL":
        p.next()
        return ("lit", None)
    if t.kind in ("ident", "qident"):
        name = p.ident()
        if p.is_op("."):
            p.fail("<expression>")      # qualified column names are not partition fields
        return ("col", name)
    p.fail("<expression>")


def _bad_literal(p, t, word, s):
    if p.dialect == "spark":
        raise EngineError(SPARK_PARSE, "\n[INVALID_TYPED_LITERAL] The value of the typed literal "
                          "\"%s\" is invalid: '%s'.(line 1, pos %d)\n" % (word, s, t.pos))
    raise EngineError("INVALID_LITERAL", "line 1:%d: '%s' is not a valid %s literal"
                      % (t.pos + 1, s, word.lower()), 1)


def _number(text, p):
    t = text.rstrip("LlDd")
    if "." in t or "e" in t or "E" in t:
        return float(t)
    return int(t)


def _strings(p):
    """One string literal; Spark concatenates adjacent ones."""
    parts = [p.next().value]
    while p.dialect == "spark" and p.tok.kind == "string":
        parts.append(p.next().value)
    return "".join(parts)


def parse_predicate(text, dialect="spark"):
    """A Predicate from a WHERE text (Spark's `where` argument)."""
    p = Parser(text, dialect)
    if p.tok.kind == "eof":
        p.fail("<expression>")
    tree = _pred_or(p)
    if p.tok.kind != "eof":
        p.fail("<EOF>")
    return Predicate(tree, text)


# ---------------------------------------------------------------------------
# DELETE FROM name WHERE predicate (Spark SQL and Trino)
# ---------------------------------------------------------------------------

class DeleteFrom:
    """A parsed DELETE: .name [parts] (Spark: any number, the catalog
    first when given; Trino: 1 to 3), .where (Predicate on rows: {column:
    value}, dates as days, timestamps as microseconds)."""

    def __init__(self, name, where):
        self.name = name
        self.where = where


def is_delete(text):
    return re.match(r"\s*DELETE\b", text, re.IGNORECASE) is not None


def parse_delete(text, dialect):
    """DELETE FROM name WHERE predicate; the WHERE is required here (tms
    never deletes every row)."""
    p = Parser(text, dialect)
    p.kw("DELETE")
    p.kw("FROM")
    name = [p.ident()]
    while p.is_op("."):
        p.next()
        name.append(p.ident())
    if dialect == "trino" and len(name) > 3:
        raise EngineError("SYNTAX_ERROR", "line 1:13: Too many dots in table name: %s"
                          % ".".join(name), 1)
    p.kw("WHERE")
    start = p.tok.pos
    tree = _pred_or(p)
    p.end()
    if dialect == "trino":
        tree = _fold_columns(tree)      # Trino's names are case-insensitive, quoted too
    return DeleteFrom(name, Predicate(tree, text[start:].strip()))


def _fold_columns(node):
    if node[0] == "col":
        return ("col", node[1].lower())
    return tuple(_fold_columns(c) if isinstance(c, tuple) else
                 [_fold_columns(x) for x in c] if isinstance(c, list) else c for c in node)


# ---------------------------------------------------------------------------
# Spark: CALL catalog.system.procedure(...)
# ---------------------------------------------------------------------------

STRING, INT, LONG, BOOL, TS, MAP, ARRAY_LONG = (
    "string", "int", "long", "boolean", "timestamp", "map<string,string>", "array<long>")
SPARK_TYPE = {STRING: "StringType", INT: "IntegerType", LONG: "LongType", BOOL: "BooleanType",
              TS: "TimestampType", MAP: "MapType(StringType,StringType,true)",
              ARRAY_LONG: "ArrayType(LongType,true)"}
LIVY_TYPE = {STRING: "string", INT: "integer", LONG: "long", BOOL: "boolean"}

# procedure -> ([(argument, type, required)], [(output column, type)])
SPARK_PROCEDURES = {
    "rewrite_data_files": (
        [("table", STRING, True), ("strategy", STRING, False), ("sort_order", STRING, False),
         ("options", MAP, False), ("where", STRING, False)],
        [("rewritten_data_files_count", INT), ("added_data_files_count", INT),
         ("rewritten_bytes_count", LONG), ("failed_data_files_count", INT),
         ("removed_delete_files_count", INT)]),
    "rewrite_position_delete_files": (
        [("table", STRING, True), ("options", MAP, False), ("where", STRING, False)],
        [("rewritten_delete_files_count", INT), ("added_delete_files_count", INT),
         ("rewritten_bytes_count", LONG), ("added_bytes_count", LONG)]),
    "rewrite_manifests": (
        [("table", STRING, True), ("use_caching", BOOL, False), ("spec_id", INT, False)],
        [("rewritten_manifests_count", INT), ("added_manifests_count", INT)]),
    "expire_snapshots": (
        [("table", STRING, True), ("older_than", TS, False), ("retain_last", INT, False),
         ("max_concurrent_deletes", INT, False), ("stream_results", BOOL, False),
         ("snapshot_ids", ARRAY_LONG, False), ("clean_expired_metadata", BOOL, False)],
        [("deleted_data_files_count", LONG), ("deleted_position_delete_files_count", LONG),
         ("deleted_equality_delete_files_count", LONG), ("deleted_manifest_files_count", LONG),
         ("deleted_manifest_lists_count", LONG), ("deleted_statistics_files_count", LONG)]),
    "remove_orphan_files": (
        [("table", STRING, True), ("older_than", TS, False), ("location", STRING, False),
         ("dry_run", BOOL, False), ("max_concurrent_deletes", INT, False),
         ("file_list_view", STRING, False), ("equal_schemes", MAP, False),
         ("equal_authorities", MAP, False), ("prefix_mismatch_mode", STRING, False)],
        [("orphan_file_location", STRING)]),
}


class SparkCall:
    """A parsed CALL: .catalog, .procedure, .args {name: python value}
    (strings, ints, bools, Timestamp, dict, list), .columns [(name, type)]."""

    def __init__(self, catalog, procedure, args, columns):
        self.catalog = catalog
        self.procedure = procedure
        self.args = args
        self.columns = columns


def _spark_value(p):
    """(type, value) of a procedure argument expression."""
    t = p.tok
    if t.kind == "string":
        return STRING, _strings(p)
    neg = 1
    if p.is_op("-"):
        p.next()
        neg = -1
        t = p.tok
        if t.kind != "number":
            p.fail()
    if t.kind == "number":
        raw = p.next().value
        if raw[-1] in "Ll":
            return LONG, neg * int(raw[:-1])
        v = _number(raw, p)
        if isinstance(v, float):
            return "double", neg * v
        return (INT if -2 ** 31 <= neg * v < 2 ** 31 else LONG), neg * v
    if t.kind == "ident":
        w = t.value.upper()
        if w in ("TRUE", "FALSE"):
            p.next()
            return BOOL, w == "TRUE"
        if w == "NULL":
            p.next()
            return "null", None
        if w in ("TIMESTAMP", "DATE") and p.toks[p.i + 1].kind == "string":
            p.next()
            s = _strings(p)
            us = parse_timestamp(s)
            if us is None:
                _bad_literal(p, t, w, s)
            return TS, Timestamp(s, us)
        if w in ("MAP", "ARRAY") and p.toks[p.i + 1].kind == "op" and p.toks[p.i + 1].value == "(":
            p.next()
            p.op("(")
            items = []
            if not p.is_op(")"):
                items.append(_spark_value(p))
                while p.is_op(","):
                    p.next()
                    items.append(_spark_value(p))
            p.op(")")
            if w == "MAP":
                if len(items) % 2:
                    raise EngineError(SPARK_ANALYSIS, "[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The "
                                      "`map` requires 2n (n > 0) parameters but the actual "
                                      "number is %d." % len(items))
                if any(ty != STRING for ty, _ in items):
                    raise EngineError(SPARK_ANALYSIS, "[DATATYPE_MISMATCH.MAP_FUNCTION_DIFF_TYPES] "
                                      "Cannot resolve \"map(...)\": the map keys and values of "
                                      "this test engine must be string literals.")
                return MAP, {items[k][1]: items[k + 1][1] for k in range(0, len(items), 2)}
            if any(ty not in (INT, LONG) for ty, _ in items):
                raise EngineError(SPARK_ANALYSIS, "[DATATYPE_MISMATCH.DATA_DIFF_TYPES] Cannot "
                                  "resolve \"array(...)\": snapshot ids are numbers.")
            return ARRAY_LONG, [v for _, v in items]
    p.fail()


def _coerce(proc, name, want, got, value):
    if got == want or got == "null":
        return value
    if want == LONG and got == INT:
        return value
    if want == ARRAY_LONG and got == ARRAY_LONG:
        return value
    raise EngineError(SPARK_ANALYSIS, "Wrong arg type for %s: cannot cast %s to %s"
                      % (name, SPARK_TYPE.get(got, got), SPARK_TYPE[want]))


def parse_spark(text):
    """Parse one Spark SQL CALL statement; raises EngineError."""
    p = Parser(text, "spark")
    p.kw("CALL")
    parts = [p.ident()]
    while p.is_op("."):
        p.next()
        parts.append(p.ident())
    p.op("(")
    positional, named = [], []
    if not p.is_op(")"):
        while True:
            if p.tok.kind in ("ident", "qident") and p.toks[p.i + 1].kind == "op" and \
                    p.toks[p.i + 1].value == "=>":
                name = p.ident()
                p.next()
                named.append((name, _spark_value(p)))
            else:
                positional.append(_spark_value(p))
            if p.is_op(","):
                p.next()
                continue
            break
    p.op(")")
    p.end()
    if len(parts) == 2:
        parts = [None] + parts
    if len(parts) != 3 or parts[1].lower() != "system":
        raise EngineError(SPARK_ANALYSIS, "Procedure %s not found" % ".".join(
            x for x in parts if x))
    proc = parts[2].lower()
    if proc not in SPARK_PROCEDURES:
        raise EngineError(SPARK_ANALYSIS, "Procedure system.%s not found" % parts[2])
    params, columns = SPARK_PROCEDURES[proc]
    if positional and named:
        raise EngineError(SPARK_ANALYSIS, "Named and positional arguments cannot be mixed")
    args = {}
    if named:
        names = [n.lower() for n, _ in named]
        known = {n for n, _, _ in params}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise EngineError(SPARK_ANALYSIS, "Unknown argument: %s" % unknown[0])
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise EngineError(SPARK_ANALYSIS, "Duplicate procedure argument: %s" % dup[0])
        given = dict(zip(names, [v for _, v in named]))
    else:
        if len(positional) > len(params):
            raise EngineError(SPARK_ANALYSIS, "Too many arguments for procedure")
        given = {params[k][0]: positional[k] for k in range(len(positional))}
    missing = [n for n, _, req in params if req and n not in given]
    if missing:
        raise EngineError(SPARK_ANALYSIS, "Missing required parameters: [%s]" % ", ".join(missing))
    for n, ty, _ in params:
        if n in given:
            got, value = given[n]
            args[n] = _coerce(proc, n, ty, got, value)
    return SparkCall(parts[0], proc, args, columns)


def parse_multipart(text):
    """Spark's parseMultipartIdentifier of a procedure's `table` string:
    parts separated by '.', each a plain identifier or `quoted` (`` is a
    backquote).  Raises the ParseException Spark raises."""
    p = Parser(text, "spark")
    parts = []
    while True:
        t = p.tok
        if t.kind == "ident":
            parts.append(p.next().value)
        elif t.kind == "qident":
            parts.append(p.next().value)
        elif t.kind == "number" and re.fullmatch(r"\d+", t.value):
            parts.append(p.next().value)   # Spark allows digit-leading identifiers
        else:
            p.fail()
        if p.is_op("."):
            p.next()
            continue
        break
    if p.tok.kind != "eof":
        p.fail()
    return parts


def spark_literal(s):
    """A Spark SQL string literal holding s."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def spark_ident(s):
    return "`" + s.replace("`", "``") + "`"


# ---------------------------------------------------------------------------
# Trino: ALTER TABLE name EXECUTE procedure [(args)] [WHERE predicate]
# ---------------------------------------------------------------------------

# procedure -> [(argument, type)]; output columns are the connector's
TRINO_PROCEDURES = {
    "optimize": [("file_size_threshold", "datasize")],
    "optimize_manifests": [],
    "expire_snapshots": [("retention_threshold", "duration")],
    "remove_orphan_files": [("retention_threshold", "duration")],
}

DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
DATASIZE_UNITS = {"B": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4,
                  "PB": 1024 ** 5}


def parse_duration(text):
    """Seconds of an airlift Duration ('7d', '1.5h'); None if malformed."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*", text)
    if not m or m.group(2) not in DURATION_UNITS:
        return None
    return float(m.group(1)) * DURATION_UNITS[m.group(2)]


def parse_datasize(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*", text)
    if not m or m.group(2) not in DATASIZE_UNITS:
        return None
    return int(float(m.group(1)) * DATASIZE_UNITS[m.group(2)])


class TrinoExecute:
    """A parsed ALTER TABLE EXECUTE: .name [catalog?, schema?, table]
    (1 to 3 parts), .procedure, .args {name: value}, .where (Predicate or
    None)."""

    def __init__(self, name, procedure, args, where):
        self.name = name
        self.procedure = procedure
        self.args = args
        self.where = where


def parse_trino(text):
    p = Parser(text, "trino")
    if not p.is_kw("ALTER"):
        if p.tok.kind == "ident" and p.tok.value.upper() in ("SELECT", "CALL", "SHOW",
                                                            "DROP", "DELETE", "INSERT"):
            raise EngineError("NOT_SUPPORTED", "This test engine runs only ALTER TABLE ... "
                              "EXECUTE statements", 13)
        p.fail("'ALTER'")
    p.next()
    p.kw("TABLE")
    name = [p.ident()]
    while p.is_op("."):
        p.next()
        name.append(p.ident())
    if len(name) > 3:
        raise EngineError("SYNTAX_ERROR", "line 1:13: Too many dots in table name: %s"
                          % ".".join(name), 1)
    p.kw("EXECUTE")
    pos = p.tok.pos
    proc = p.ident()
    positional, named = [], []
    if p.is_op("("):
        p.next()
        if not p.is_op(")"):
            while True:
                if p.tok.kind in ("ident", "qident") and p.toks[p.i + 1].kind == "op" and \
                        p.toks[p.i + 1].value == "=>":
                    an = p.ident()
                    p.next()
                    named.append((an, _trino_value(p)))
                else:
                    positional.append(_trino_value(p))
                if p.is_op(","):
                    p.next()
                    continue
                break
        p.op(")")
    where = None
    if p.is_kw("WHERE"):
        p.next()
        tree = _pred_or(p)
        where = Predicate(tree, text[text.upper().rfind("WHERE") + 5:].strip())
    if p.tok.kind != "eof":
        p.fail("<EOF>")
    if proc not in TRINO_PROCEDURES:
        raise EngineError("PROCEDURE_NOT_FOUND", "line 1:%d: Table procedure not registered: %s"
                          % (pos + 1, proc), 29)
    params = TRINO_PROCEDURES[proc]
    if positional and named:
        raise EngineError("INVALID_ARGUMENTS", "line 1:%d: Named and positional arguments "
                          "cannot be mixed" % (pos + 1), 7)
    given = {}
    if named:
        known = [n for n, _ in params]
        for an, v in named:
            if an not in known:
                raise EngineError("INVALID_PROCEDURE_ARGUMENT", "line 1:%d: Unknown argument "
                                  "name: %s" % (pos + 1, an), 30)
            if an in given:
                raise EngineError("INVALID_PROCEDURE_ARGUMENT", "line 1:%d: Duplicate argument "
                                  "name: %s" % (pos + 1, an), 30)
            given[an] = v
    else:
        if len(positional) > len(params):
            raise EngineError("INVALID_PROCEDURE_ARGUMENT", "line 1:%d: Too many arguments for "
                              "procedure" % (pos + 1), 30)
        given = {params[k][0]: positional[k] for k in range(len(positional))}
    args = {}
    for an, ty in params:
        if an not in given:
            continue
        kind, v = given[an]
        if kind != "string":
            raise EngineError("TYPE_MISMATCH", "line 1:%d: Cannot cast type integer to varchar "
                              "for argument %s" % (pos + 1, an), 58)
        conv = parse_duration(v) if ty == "duration" else parse_datasize(v)
        if conv is None:
            raise EngineError("INVALID_PROCEDURE_ARGUMENT", "Unable to set procedure property "
                              "'%s' to ['%s']: %s is not a valid %s"
                              % (an, v, v, "duration" if ty == "duration" else "data size"), 30)
        args[an] = conv
    if where is not None and proc != "optimize":
        raise EngineError("NOT_SUPPORTED", "WHERE not supported for procedure %s" % proc, 13)
    return TrinoExecute(name, proc, args, where)


def _trino_value(p):
    t = p.tok
    if t.kind == "string":
        p.next()
        return "string", t.value
    if t.kind == "number":
        p.next()
        return "number", _number(t.value, p)
    p.fail("<expression>")
