/* csv.c — RFC 4180 fields and records (see csv.h). */
#include <stdlib.h>
#include <string.h>

#include "csv.h"

char *csv_field(const char *s)
{
    size_t n = strlen(s), quotes = 0;
    for (const char *p = s; *p; p++)
        quotes += *p == '"';
    if (!strpbrk(s, ",\"\r\n")) {
        char *out = malloc(n + 1);
        return out ? memcpy(out, s, n + 1) : NULL;
    }
    char *out = malloc(n + quotes + 3), *q = out;
    if (!out)
        return NULL;
    *q++ = '"';
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            *q++ = '"'; /* an inner quote is written twice */
        *q++ = *p;
    }
    *q++ = '"';
    *q = 0;
    return out;
}

void csv_record_free(char **fields, int n)
{
    for (int i = 0; fields && i < n; i++)
        free(fields[i]);
    free(fields);
}

/* Appends one field (text[a..b), quoted or not) to the record being read. */
static int add_field(char ***fields, int *n, const char *text, size_t a, size_t b, int quoted)
{
    char **grown = realloc(*fields, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    *fields = grown;
    char *f = malloc(b - a + 1), *q = f;
    if (!f)
        return -1;
    for (size_t i = a; i < b; i++) {
        *q++ = text[i];
        if (quoted && text[i] == '"')
            i++; /* the second quote of a doubled pair */
    }
    *q = 0;
    (*fields)[(*n)++] = f;
    return 0;
}

int csv_record(const char *text, size_t len, size_t *pos, char ***fields, int *n)
{
    char **got = NULL;
    int count = 0, rc = 0;
    size_t i = *pos;
    for (;;) {
        size_t a = i, b;
        int quoted = i < len && text[i] == '"';
        if (quoted) {
            for (a = ++i;; i++) {
                if (i >= len)
                    goto out; /* the text ends inside the quotes */
                if (text[i] == '"' && (i + 1 >= len || text[i + 1] != '"'))
                    break;
                if (text[i] == '"')
                    i++;
                else if (!text[i])
                    rc = -1;
            }
            b = i++;
        } else {
            while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r' &&
                   text[i] != '"' && text[i])
                i++;
            b = i;
        }
        if (rc || (i < len && (quoted ? text[i] != ',' && text[i] != '\n' && text[i] != '\r'
                                      : text[i] == '"' || !text[i]))) {
            rc = -1; /* a quote inside an unquoted field, text after the closing one, a NUL */
            goto out;
        }
        if (i < len && text[i] == '\r' && i + 1 < len && text[i + 1] != '\n') {
            rc = -1;
            goto out;
        }
        if (i >= len || (text[i] == '\r' && i + 1 >= len))
            goto out; /* no line end yet: unfinished */
        if (add_field(&got, &count, text, a, b, quoted)) {
            rc = -1;
            goto out;
        }
        if (text[i] == ',') {
            i++;
            continue;
        }
        i += text[i] == '\r' ? 2 : 1;
        *pos = i;
        *fields = got;
        *n = count;
        return 1;
    }
out:
    csv_record_free(got, count);
    return rc;
}
