/* csv.h — the one CSV writer and reader of the CLI (RFC 4180): the streamed results' CSV is
 * written with csv_field and read back (--resume) with csv_record, so that any text — a path
 * or a label holding a comma, a double quote, CR or LF — survives the round trip. */
#ifndef PAGODA_CSV_H
#define PAGODA_CSV_H

#include <stddef.h>

/* The field of text s, malloc'd: s itself, or, when it holds a comma, a double quote, CR or
 * LF, s between double quotes with each inner double quote doubled. NULL when out of memory. */
char *csv_field(const char *s);

/* Reads the record at text[*pos] (text: len bytes). A record ends at a line end (LF or CRLF)
 * outside quotes; a quoted field may hold commas, doubled quotes and line ends. On 1 (a
 * complete record) *fields gets its *n fields as malloc'd C strings (free with
 * csv_record_free) and *pos moves past its line end. 0: the text ends inside the record (an
 * unfinished last line, say after a crash); -1: not RFC 4180 (a quote inside an unquoted
 * field, text after a closing quote, a NUL byte) or out of memory; nothing is returned then. */
int csv_record(const char *text, size_t len, size_t *pos, char ***fields, int *n);
void csv_record_free(char **fields, int n);

#endif
