/* The strict JSON reader of json.h: recursive descent over the text, nodes and decoded strings in
 * two growing arrays (indices, never pointers, until the parse is over). */
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"

typedef struct {
    rp_json_doc *doc;
    const unsigned char *p;
    size_t len, pos;
    int depth;
} parser;

const rp_json_type_desc rp_json_types[RP_JSON_OBJECT + 1] = {
    [RP_JSON_NULL] = {"null", "null"},         [RP_JSON_FALSE] = {"false", "false"},
    [RP_JSON_TRUE] = {"true", "true"},         [RP_JSON_NUMBER] = {"number", "a number"},
    [RP_JSON_STRING] = {"string", "a string"}, [RP_JSON_ARRAY] = {"array", "an array"},
    [RP_JSON_OBJECT] = {"object", "an object"},
};

const char *rp_json_type_name(rp_json_type t)
{
    return (int)t >= 0 && t <= RP_JSON_OBJECT ? rp_json_types[t].name : "?";
}

static rp_status fail(const parser *ps, size_t at, const char *what)
{
    return rp_error(RP_ERR_ARG, "at byte %zu: %s", at, what);
}

/* "expected ':' after an object key, got 'x'" with the character (or "the end") */
static rp_status unexpected(const parser *ps, const char *expected)
{
    if (ps->pos >= ps->len)
        return rp_error(RP_ERR_ARG, "at byte %zu: expected %s, got the end of the text", ps->pos,
                        expected);
    unsigned char c = ps->p[ps->pos];
    if (c >= 0x20 && c < 0x7f)
        return rp_error(RP_ERR_ARG, "at byte %zu: expected %s, got '%c'", ps->pos, expected, c);
    return rp_error(RP_ERR_ARG, "at byte %zu: expected %s, got byte 0x%02x", ps->pos, expected,
                    (unsigned)c);
}

static void skip_ws(parser *ps)
{
    while (ps->pos < ps->len) {
        unsigned char c = ps->p[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        ps->pos++;
    }
}

static rp_status new_node(parser *ps, rp_json_type type, size_t *out)
{
    rp_json_doc *d = ps->doc;
    if (d->max_nodes && d->n == d->max_nodes)
        return rp_error(RP_ERR_ARG, "at byte %zu: more than %zu values", ps->pos, d->max_nodes);
    if (d->n == d->cap) {
        size_t ncap = d->cap ? 2 * d->cap : 64;
        rp_json_node *nn = realloc(d->nodes, ncap * sizeof *nn);
        if (!nn) return rp_error(RP_ERR_NOMEM, "out of memory reading JSON");
        d->nodes = nn;
        d->cap = ncap;
    }
    rp_json_node *n = &d->nodes[d->n];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->pos = (uint32_t)ps->pos;
    n->first = n->next = (uint32_t)RP_JSON_NONE;
    *out = d->n++;
    return RP_OK;
}

static rp_status put_bytes(parser *ps, const void *b, size_t k)
{
    rp_json_doc *d = ps->doc;
    if (d->scap - d->slen < k + 1) { /* never more than the text's length + one NUL a string */
        size_t ncap = d->scap ? d->scap : 256;
        while (ncap - d->slen < k + 1) ncap *= 2;
        char *ns = realloc(d->strings, ncap);
        if (!ns) return rp_error(RP_ERR_NOMEM, "out of memory reading JSON");
        d->strings = ns;
        d->scap = ncap;
    }
    memcpy(d->strings + d->slen, b, k);
    d->slen += k;
    return RP_OK;
}

static void put_utf8(unsigned char *b, size_t *k, uint32_t cp)
{
    if (cp < 0x80) {
        b[(*k)++] = (unsigned char)cp;
    } else if (cp < 0x800) {
        b[(*k)++] = (unsigned char)(0xC0 | (cp >> 6));
        b[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        b[(*k)++] = (unsigned char)(0xE0 | (cp >> 12));
        b[(*k)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        b[(*k)++] = (unsigned char)(0xF0 | (cp >> 18));
        b[(*k)++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[(*k)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[(*k)++] = (unsigned char)(0x80 | (cp & 0x3F));
    }
}

size_t rp_json_utf8_len(const void *s, size_t n)
{
    const unsigned char *p = s;
    if (n == 0) return 0;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t k;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1Fu, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0Fu, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07u, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

static int hex4(const unsigned char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else return 0;
        *v = (*v << 4) | d;
    }
    return 1;
}

/* A string at ps->pos (its opening quote); its decoded bytes go to doc->strings (NUL after them):
 * *off and *n. */
static rp_status parse_string(parser *ps, size_t *off, size_t *n)
{
    size_t start = ps->pos;
    ps->pos++; /* the quote */
    *off = ps->doc->slen;
    for (;;) {
        if (ps->pos >= ps->len) return fail(ps, start, "unterminated string");
        unsigned char c = ps->p[ps->pos];
        if (c == '"') {
            ps->pos++;
            break;
        }
        if (c < 0x20) return fail(ps, ps->pos, "control character in a string (escape it)");
        if (c == '\\') {
            if (ps->len - ps->pos < 2) return fail(ps, start, "unterminated string");
            unsigned char e = ps->p[ps->pos + 1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                RP_TRY(put_bytes(ps, &map[simple - "\"\\/bfnrt"], 1));
                ps->pos += 2;
                continue;
            }
            if (e != 'u') return fail(ps, ps->pos, "invalid escape in a string");
            uint32_t cp, lo;
            if (ps->len - ps->pos < 6 || !hex4(ps->p + ps->pos + 2, &cp))
                return fail(ps, ps->pos, "invalid \\u escape (four hex digits expected)");
            size_t esc = ps->pos;
            ps->pos += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(ps, esc, "unpaired surrogate in a \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (ps->len - ps->pos < 6 || ps->p[ps->pos] != '\\' || ps->p[ps->pos + 1] != 'u' ||
                    !hex4(ps->p + ps->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return fail(ps, esc, "unpaired surrogate in a \\u escape");
                ps->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            unsigned char b[4];
            size_t k = 0;
            put_utf8(b, &k, cp);
            RP_TRY(put_bytes(ps, b, k));
            continue;
        }
        size_t k = rp_json_utf8_len(ps->p + ps->pos, ps->len - ps->pos);
        if (k == 0) return fail(ps, ps->pos, "invalid UTF-8 in a string");
        RP_TRY(put_bytes(ps, ps->p + ps->pos, k));
        ps->pos += k;
    }
    *n = ps->doc->slen - *off;
    RP_TRY(put_bytes(ps, "", 1)); /* the NUL */
    return RP_OK;
}

/* A number literal: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static rp_status parse_number(parser *ps, size_t node)
{
    size_t start = ps->pos, i = ps->pos;
    const unsigned char *p = ps->p;
#define DIGIT(j) ((j) < ps->len && p[j] >= '0' && p[j] <= '9')
    if (i < ps->len && p[i] == '-') i++;
    if (!DIGIT(i)) return fail(ps, start, "invalid number");
    if (p[i] == '0') {
        i++;
        if (DIGIT(i)) return fail(ps, start, "invalid number (leading zero)");
    } else {
        while (DIGIT(i)) i++;
    }
    if (i < ps->len && p[i] == '.') {
        i++;
        if (!DIGIT(i)) return fail(ps, start, "invalid number (no digit after '.')");
        while (DIGIT(i)) i++;
    }
    if (i < ps->len && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < ps->len && (p[i] == '+' || p[i] == '-')) i++;
        if (!DIGIT(i)) return fail(ps, start, "invalid number (no digit in the exponent)");
        while (DIGIT(i)) i++;
    }
#undef DIGIT
    ps->doc->nodes[node].str = (uint32_t)start;
    ps->doc->nodes[node].str_len = (uint32_t)(i - start);
    ps->pos = i;
    return RP_OK;
}

static rp_status parse_value(parser *ps, size_t *out);

/* Appends child to the list of parent (tail kept by the caller). */
static void link_child(rp_json_doc *d, size_t parent, size_t *tail, size_t child)
{
    if (*tail == RP_JSON_NONE) d->nodes[parent].first = (uint32_t)child;
    else d->nodes[*tail].next = (uint32_t)child;
    *tail = child;
    d->nodes[parent].count++;
}

static rp_status parse_array(parser *ps, size_t node)
{
    size_t tail = RP_JSON_NONE;
    ps->pos++; /* [ */
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == ']') {
        ps->pos++;
        return RP_OK;
    }
    for (;;) {
        size_t child;
        RP_TRY(parse_value(ps, &child));
        link_child(ps->doc, node, &tail, child);
        skip_ws(ps);
        if (ps->pos < ps->len && ps->p[ps->pos] == ',') {
            ps->pos++;
            continue;
        }
        if (ps->pos < ps->len && ps->p[ps->pos] == ']') {
            ps->pos++;
            return RP_OK;
        }
        return unexpected(ps, "',' or ']' in an array");
    }
}

typedef struct {
    const char *key;
    size_t len, pos;
} key_ref;

static int key_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos; /* the later one is the duplicate */
}

/* RP_ERR_ARG "at byte 40: duplicate key \"a\"" (the second occurrence) when object node repeats
 * a key: the keys sorted (no quadratic scan of a forged header with a million keys). */
static rp_status check_duplicates(const rp_json_doc *d, size_t node)
{
    size_t n = d->nodes[node].count;
    if (n < 2) return RP_OK;
    key_ref *k = malloc(n * sizeof *k);
    if (!k) return rp_error(RP_ERR_NOMEM, "out of memory reading JSON");
    size_t i = 0;
    for (size_t c = d->nodes[node].first; c != RP_JSON_NONE; c = d->nodes[c].next, i++)
        k[i] = (key_ref){d->strings + d->nodes[c].key, d->nodes[c].key_len, d->nodes[c].pos};
    qsort(k, n, sizeof *k, key_cmp);
    size_t dup = RP_JSON_NONE;
    for (i = 1; i < n; i++)
        if (k[i].len == k[i - 1].len && memcmp(k[i].key, k[i - 1].key, k[i].len) == 0 &&
            (dup == RP_JSON_NONE || k[i].pos < k[dup].pos))
            dup = i;
    rp_status st = RP_OK;
    if (dup != RP_JSON_NONE) {
        char buf[RP_JSON_NAME_TEXT + 8];
        st = rp_error(RP_ERR_ARG, "at byte %zu: duplicate key %s", k[dup].pos,
                      rp_json_quoted(buf, sizeof buf, k[dup].key, k[dup].len, RP_JSON_NAME_TEXT));
    }
    free(k);
    return st;
}

static rp_status parse_object(parser *ps, size_t node)
{
    size_t tail = RP_JSON_NONE;
    ps->pos++; /* { */
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == '}') {
        ps->pos++;
        return RP_OK;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->pos >= ps->len || ps->p[ps->pos] != '"')
            return unexpected(ps, "a string key in an object");
        size_t kpos = ps->pos, koff, klen;
        RP_TRY(parse_string(ps, &koff, &klen));
        skip_ws(ps);
        if (ps->pos >= ps->len || ps->p[ps->pos] != ':')
            return unexpected(ps, "':' after an object key");
        ps->pos++;
        size_t child;
        RP_TRY(parse_value(ps, &child));
        ps->doc->nodes[child].key = (uint32_t)koff;
        ps->doc->nodes[child].key_len = (uint32_t)klen;
        ps->doc->nodes[child].pos = (uint32_t)kpos; /* a member is located by its key */
        link_child(ps->doc, node, &tail, child);
        skip_ws(ps);
        if (ps->pos < ps->len && ps->p[ps->pos] == ',') {
            ps->pos++;
            continue;
        }
        if (ps->pos < ps->len && ps->p[ps->pos] == '}') {
            ps->pos++;
            return check_duplicates(ps->doc, node);
        }
        return unexpected(ps, "',' or '}' in an object");
    }
}

static rp_status parse_value(parser *ps, size_t *out)
{
    skip_ws(ps);
    if (ps->pos >= ps->len) return unexpected(ps, "a value");
    unsigned char c = ps->p[ps->pos];
    static const struct {
        const char *word;
        rp_json_type type;
    } words[] = {{"null", RP_JSON_NULL}, {"false", RP_JSON_FALSE}, {"true", RP_JSON_TRUE}};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(words[i].word);
        if (c == (unsigned char)words[i].word[0]) {
            if (ps->len - ps->pos < k || memcmp(ps->p + ps->pos, words[i].word, k) != 0)
                return unexpected(ps, "a value");
            RP_TRY(new_node(ps, words[i].type, out));
            ps->pos += k;
            return RP_OK;
        }
    }
    if (c == '"') {
        RP_TRY(new_node(ps, RP_JSON_STRING, out));
        size_t off, n;
        RP_TRY(parse_string(ps, &off, &n));
        ps->doc->nodes[*out].str = (uint32_t)off;
        ps->doc->nodes[*out].str_len = (uint32_t)n;
        return RP_OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        RP_TRY(new_node(ps, RP_JSON_NUMBER, out));
        return parse_number(ps, *out);
    }
    if (c == '[' || c == '{') {
        if (ps->depth == RP_JSON_MAX_DEPTH)
            return rp_error(RP_ERR_ARG, "at byte %zu: nested deeper than %d levels", ps->pos,
                            RP_JSON_MAX_DEPTH);
        RP_TRY(new_node(ps, c == '[' ? RP_JSON_ARRAY : RP_JSON_OBJECT, out));
        ps->depth++;
        rp_status st = c == '[' ? parse_array(ps, *out) : parse_object(ps, *out);
        ps->depth--;
        return st;
    }
    return unexpected(ps, "a value");
}

rp_status rp_json_parse(rp_json_doc *doc, const char *text, size_t len, size_t max_nodes)
{
    if (!doc) return rp_error(RP_ERR_ARG, "rp_json_parse: NULL document");
    memset(doc, 0, sizeof *doc);
    if (!text && len) return rp_error(RP_ERR_ARG, "rp_json_parse: NULL text");
    if (len > RP_JSON_MAX_TEXT)
        return rp_error(RP_ERR_ARG, "a JSON text of %zu bytes is too long", len);
    doc->text = text;
    doc->max_nodes = max_nodes;
    parser ps = {doc, (const unsigned char *)text, len, 0, 0};
    size_t root;
    RP_TRY(parse_value(&ps, &root));
    skip_ws(&ps);
    if (ps.pos != len) return unexpected(&ps, "the end of the text after the value");
    return RP_OK;
}

void rp_json_free(rp_json_doc *doc)
{
    if (!doc) return;
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

size_t rp_json_get(const rp_json_doc *doc, size_t obj, const char *key)
{
    if (obj >= doc->n || doc->nodes[obj].type != RP_JSON_OBJECT) return RP_JSON_NONE;
    size_t klen = strlen(key);
    for (size_t c = doc->nodes[obj].first; c != RP_JSON_NONE; c = doc->nodes[c].next)
        if (doc->nodes[c].key_len == klen &&
            memcmp(doc->strings + doc->nodes[c].key, key, klen) == 0)
            return c;
    return RP_JSON_NONE;
}

/* The literal of a number node, NUL-terminated in buf (n bytes; longer literals: NULL). */
static const char *literal(const rp_json_doc *doc, size_t node, char *buf, size_t n, rp_status *st)
{
    const rp_json_node *x = &doc->nodes[node];
    if (x->type != RP_JSON_NUMBER) {
        *st = rp_error(RP_ERR_ARG, "expected a number, got %s", rp_json_type_name(x->type));
        return NULL;
    }
    if (x->str_len >= n) {
        char shown[RP_JSON_LITERAL_SHOWN + 1];
        snprintf(shown, sizeof shown, "%.*s", RP_JSON_LITERAL_SHOWN, doc->text + x->str);
        *st = rp_error(RP_ERR_RANGE, "number %s... is out of range", shown);
        return NULL;
    }
    memcpy(buf, doc->text + x->str, x->str_len);
    buf[x->str_len] = '\0';
    return buf;
}

/* The value of the decimal digits in digits (all '0'..'9') into *x, RP_ERR_RANGE naming the
 * literal lit when it exceeds lim. */
static rp_status digits_value(const char *digits, const char *lit, uint64_t lim, uint64_t *x)
{
    uint64_t acc = 0;
    for (const char *c = digits; *c; c++) {
        if (!rp_mul_u64(acc, 10, &acc) || !rp_add_u64(acc, (uint64_t)(*c - '0'), &acc) ||
            acc > lim)
            return rp_error(RP_ERR_RANGE, "%s is out of range", lit);
    }
    *x = acc;
    return RP_OK;
}

rp_status rp_json_u64(const rp_json_doc *doc, size_t node, uint64_t *v)
{
    char buf[RP_JSON_INT_LITERAL];
    rp_status st = RP_OK;
    const char *s = literal(doc, node, buf, sizeof buf, &st);
    if (!s) return st;
    if (strspn(s, "0123456789") != strlen(s))
        return rp_error(RP_ERR_RANGE, "%s is not an integer >= 0", s);
    return digits_value(s, s, UINT64_MAX, v);
}

rp_status rp_json_i64(const rp_json_doc *doc, size_t node, int64_t *v)
{
    char buf[RP_JSON_INT_LITERAL];
    rp_status st = RP_OK;
    const char *s = literal(doc, node, buf, sizeof buf, &st);
    if (!s) return st;
    int neg = s[0] == '-';
    const char *digits = s + neg;
    if (!*digits || strspn(digits, "0123456789") != strlen(digits))
        return rp_error(RP_ERR_RANGE, "%s is not an integer", s);
    uint64_t x = 0;
    RP_TRY(digits_value(digits, s, neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX, &x));
    *v = neg ? (x == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)x) : (int64_t)x;
    return RP_OK;
}

rp_status rp_json_double(const rp_json_doc *doc, size_t node, double *v)
{
    char buf[RP_JSON_NUM_LITERAL];
    rp_status st = RP_OK;
    const char *s = literal(doc, node, buf, sizeof buf, &st);
    if (!s) return st;
    errno = 0;
    char *end;
    double x = strtod(s, &end);
    if (*end != '\0' || (errno == ERANGE && isinf(x)))
        return rp_error(RP_ERR_RANGE, "%s is out of range", s);
    *v = x;
    return RP_OK;
}

size_t rp_json_write_string(FILE *f, const char *s, size_t len)
{
    char buf[8];
    size_t total = 0;
#define EMIT(p, k)                                      \
    do {                                                \
        if (f) fwrite((p), 1, (k), f);                  \
        total += (k);                                   \
    } while (0)
    EMIT("\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[0] = '\\';
            buf[1] = (char)c;
            EMIT(buf, 2);
        } else if (c < 0x20) {
            snprintf(buf, sizeof buf, "\\u%04x", (unsigned)c);
            EMIT(buf, 6);
        } else {
            EMIT(&s[i], 1);
        }
    }
    EMIT("\"", 1);
#undef EMIT
    return total;
}

const char *rp_json_printable(char *buf, size_t n, const char *s, size_t len)
{
    size_t o = 0;
    if (n == 0) return buf;
    for (size_t i = 0; i < len; i++) {
        if (i == RP_JSON_SHOWN) {
            if (o + 4 <= n) memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) {
            if (o + 2 > n) break;
            buf[o++] = (char)c;
        } else {
            if (o + 5 > n) break;
            snprintf(buf + o, 5, "\\x%02x", (unsigned)c);
            o += 4;
        }
    }
    buf[o] = '\0';
    return buf;
}

const char *rp_json_quoted(char *buf, size_t n, const char *s, size_t len, size_t room)
{
    char p[RP_JSON_NAME_TEXT];
    snprintf(buf, n, "\"%s\"", rp_json_printable(p, room < sizeof p ? room : sizeof p, s, len));
    return buf;
}
