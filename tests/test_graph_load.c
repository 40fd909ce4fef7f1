/* test_graph_load.c — hostile ONNX files without a device: the nesting guard that runs before
 * protobuf-c, and the host evaluator (pgd__graph_host_only_run, white-box) on the inputs that
 * once broke it (tests/data/fuzz-regress/onnx-*.onnx, written by tools/golden/make-onnx-models.py
 * --regress): each is a clean error or a defined value, never an overflow. The files are also
 * replayed through the fuzz target by test_fuzz_regress, where the sanitizer build catches any
 * undefined behaviour; here each outcome is asserted. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/graph/graph.h"

static const char *data_dir(void)
{
    const char *d = getenv("PAGODA_TEST_DATA");
    return d ? d : "tests/data";
}

/* Loads tests/data/fuzz-regress/onnx-NAME.onnx (it must load) and runs its host nodes. */
static int host_run(const char *name, pgd_graph **gp, pgd_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz-regress/onnx-%s.onnx", data_dir(), name);
    pgd_error *e = NULL;
    int rc = pgd_graph_load(NULL, path, gp, &e);
    ck_assert_msg(rc == PGD_OK, "%s: %s", path, pgd_error_get_message(e));
    return pgd__graph_host_only_run(*gp, 1 << 16, err);
}

/* The host value called `name` in g. */
static const ghost *value(const pgd_graph *g, const char *name)
{
    int v = pgd__graph_value(g, name);
    ck_assert_int_ge(v, 0);
    return g->values[v].h;
}

static void expect_error(const char *name, int code, const char *says)
{
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    int rc = host_run(name, &g, &err);
    ck_assert_msg(rc == code, "%s: status %d, want %d (%s)", name, rc, code,
                  pgd_error_get_message(err));
    ck_assert_msg(strstr(pgd_error_get_message(err), says) &&
                      strstr(pgd_error_get_message(err), name),
                  "%s: %s", name, pgd_error_get_message(err));
    pgd_error_destroy(err);
    pgd_graph_destroy(g);
}

START_TEST(shape_without_input)
{
    /* the index of an input never given was read (garbage, or -1) */
    expect_error("shape-no-input", PGD_ERR_FORMAT, "node 's' (Shape");
    expect_error("shape-empty-input", PGD_ERR_FORMAT, "no input");
}
END_TEST

START_TEST(overflowing_shapes)
{
    /* Tile's repeats multiplied the dims unchecked (4 x 2^62 wrapped) */
    expect_error("tile-overflow", PGD_ERR_TOO_LARGE, "repeats[0] = 4611686018427387904");
    /* Reshape's target dims multiplied unchecked (2^40 x 2^40) */
    expect_error("reshape-overflow", PGD_ERR_SHAPE, "target shape");
}
END_TEST

START_TEST(flatten)
{
    /* axis 9 on 2 dims ran as axis 2 ([6, 1]); [0, 3] flattened to [0, 0] */
    expect_error("flatten-axis-9", PGD_ERR_SHAPE, "axis 9 out of range for 2 dims");
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(host_run("flatten-zero", &g, &err), PGD_OK);
    const ghost *y = value(g, "Y");
    ck_assert(y && y->nd == 2 && y->dim[0] == 0 && y->dim[1] == 3);
    pgd_graph_destroy(g);
}
END_TEST

START_TEST(resize_cumsum)
{
    /* Resize of an empty dim to 3 read x[-1] (ASan: heap overflow); a scale of 1e30 and a
     * CumSum axis of 1e30 were cast to int64 out of range */
    expect_error("resize-empty", PGD_ERR_SHAPE, "dim 0 of 0 elements cannot be resized to 3");
    expect_error("resize-scale-huge", PGD_ERR_SHAPE, "dim 0 of 2 elements cannot be resized");
    expect_error("cumsum-axis-huge", PGD_ERR_SHAPE, "axis out of range");
}
END_TEST

START_TEST(saturating_integers)
{
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(host_run("cast-huge", &g, &err), PGD_OK);
    const ghost *y = value(g, "Y");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->n, 3);
    /* 1e30, -inf, NaN as int64: saturated, NaN 0 (a C cast is undefined for each) */
    ck_assert(y->i[0] == INT64_MAX && y->i[1] == INT64_MIN && y->i[2] == 0);
    pgd_graph_destroy(g);

    ck_assert_int_eq(host_run("div-int-min", &g, &err), PGD_OK);
    y = value(g, "Y");
    ck_assert_ptr_nonnull(y);
    ck_assert(y->n == 1 && y->i[0] == INT64_MAX); /* -INT64_MIN saturated; it trapped */
    pgd_graph_destroy(g);

    ck_assert_int_eq(host_run("slice-step-min", &g, &err), PGD_OK);
    y = value(g, "Y");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->n, 1); /* element 3 alone: a step of INT64_MIN negated overflowed */
    pgd_graph_destroy(g);

    ck_assert_int_eq(host_run("size-scalar", &g, &err), PGD_OK);
    y = value(g, "Y");
    ck_assert(y && y->nd == 0 && y->n == 1 && y->i[0] == 0);
    pgd_graph_destroy(g);
}
END_TEST

START_TEST(zero_dim_beside_huge)
{
    /* [0, 2^62] held no elements, so its dims passed; Concat then added 2^62 + 2^62 */
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz-regress/onnx-concat-zero-2p62.onnx", data_dir());
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_graph_load(NULL, path, &g, &err), PGD_ERR_FORMAT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "tensor 'T': dim 1 is 4611686018427387904"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

START_TEST(strings_not_utf8)
{
    /* found by fuzz_onnx: producer_name with 0xff bytes loaded, and pgd_graph_report returned
     * NULL (Jansson refuses such strings); now refused at load by field */
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz-regress/onnx-producer-not-utf8.onnx", data_dir());
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_graph_load(NULL, path, &g, &err), PGD_ERR_FORMAT);
    ck_assert_msg(
        strstr(pgd_error_get_message(err), "onnx.ModelProto's producer_name is not UTF-8"), "%s",
        pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

START_TEST(report_latin1_path)
{
    /* a file name that is not UTF-8 (Latin-1 "café"): the report was NULL, as Jansson refuses
     * the string; the name is now reported with U+FFFD for the byte */
    char src[4096], path[] = "/tmp/pgd-test-caf\xe9-XXXXXX";
    snprintf(src, sizeof src, "%s/fuzz-regress/onnx-size-scalar.onnx", data_dir());
    unsigned char *buf = NULL;
    size_t size = 0;
    ck_assert_int_eq(pgd_test_read_file(src, &buf, &size), 0);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, size), (ssize_t)size);
    close(fd);
    free(buf);
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    int rc = pgd_graph_load(NULL, path, &g, &err);
    unlink(path);
    ck_assert_msg(rc == PGD_OK, "%s", pgd_error_get_message(err));
    char *report = pgd_graph_report(g);
    ck_assert_ptr_nonnull(report);
    ck_assert_msg(strstr(report, "pgd-test-caf\xef\xbf\xbd-"), "%s", report);
    ck_assert_msg(strstr(report, "\"Size\": 1"), "%s", report);
    free(report);
    pgd_graph_destroy(g);
}
END_TEST

/* A ModelProto whose graph nests `levels` If subgraphs (Graph > Node > Attribute > Graph), the
 * protobuf wire format written here from the innermost graph outwards, each wrapper prepended. */
typedef struct wbuf {
    uint8_t *b;
    size_t pos, cap; /* the message so far is b[pos, cap) */
} wbuf;

static void prepend(wbuf *w, const void *p, size_t n)
{
    ck_assert(w->pos >= n);
    w->pos -= n;
    memcpy(w->b + w->pos, p, n);
}

/* The key and length of field `field` around everything since `mark` bytes from the end. */
static void wrap(wbuf *w, int field, size_t mark)
{
    uint8_t h[11];
    size_t k = 0, v = w->cap - w->pos - mark;
    h[k++] = (uint8_t)(field << 3 | 2);
    do {
        h[k++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    prepend(w, h, k);
}

static uint8_t *nested_model(int levels, size_t *size)
{
    wbuf w = {.cap = 64 + (size_t)levels * 40};
    w.pos = w.cap;
    w.b = malloc(w.cap);
    ck_assert_ptr_nonnull(w.b);
    static const uint8_t type_graph[3] = {0xa0, 0x01, 5}; /* field 20 (a 2-byte key) */
    for (int l = 0; l < levels; l++) {
        wrap(&w, 6, 0);                 /* AttributeProto.g */
        prepend(&w, type_graph, 3);     /* type GRAPH */
        prepend(&w, "then_branch", 11); /* name */
        wrap(&w, 1, w.cap - w.pos - 11);
        wrap(&w, 5, 0);       /* NodeProto.attribute */
        prepend(&w, "If", 2); /* op_type */
        wrap(&w, 4, w.cap - w.pos - 2);
        if (l == levels - 1) { /* the outermost If's output "o" */
            prepend(&w, "o", 1);
            wrap(&w, 2, w.cap - w.pos - 1);
        }
        wrap(&w, 1, 0); /* GraphProto.node */
    }
    prepend(&w, "o", 1); /* GraphProto.output { name "o" } */
    wrap(&w, 1, w.cap - w.pos - 1);
    wrap(&w, 12, w.cap - w.pos - 3);
    wrap(&w, 7, 0);                                                        /* ModelProto.graph */
    static const uint8_t head[6] = {1 << 3, 8, 8 << 3 | 2, 2, 2 << 3, 17}; /* ir 8, opset 17 */
    prepend(&w, head, sizeof head);
    *size = w.cap - w.pos;
    memmove(w.b, w.b + w.pos, *size);
    return w.b;
}

static int load_nested(int levels, pgd_error **err)
{
    size_t size;
    uint8_t *m = nested_model(levels, &size);
    char path[] = "/tmp/pgd-test-nested-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, m, size), (ssize_t)size);
    close(fd);
    free(m);
    pgd_graph *g = NULL;
    int rc = pgd_graph_load(NULL, path, &g, err);
    pgd_graph_destroy(g);
    unlink(path);
    return rc;
}

START_TEST(message_cap)
{
    /* 2^23 + 1 empty NodeProtos (2 bytes each): refused before protobuf-c allocates a struct
     * for each (some 100 times the file's size) */
    size_t nodes = ((size_t)1 << 23) + 1, gsize = 2 * nodes, size = 0;
    uint8_t *m = malloc(gsize + 32);
    ck_assert_ptr_nonnull(m);
    static const uint8_t head[6] = {1 << 3, 8, 8 << 3 | 2, 2, 2 << 3, 17}; /* ir 8, opset 17 */
    memcpy(m, head, sizeof head);
    size = sizeof head;
    m[size++] = 7 << 3 | 2; /* graph, its length as a varint */
    for (size_t v = gsize; v; v >>= 7)
        m[size++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
    for (size_t k = 0; k < nodes; k++)
        m[size++] = 1 << 3 | 2, m[size++] = 0;
    char path[] = "/tmp/pgd-test-messages-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, m, size), (ssize_t)size);
    close(fd);
    free(m);
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    int rc = pgd_graph_load(NULL, path, &g, &err);
    unlink(path);
    ck_assert_int_eq(rc, PGD_ERR_TOO_LARGE);
    ck_assert_msg(strstr(pgd_error_get_message(err), "more than 8388608 protobuf messages"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

START_TEST(nesting_guard)
{
    pgd_error *err = NULL;
    /* 20 levels (61 messages deep) load: the graph's If nodes are only reported */
    ck_assert_msg(load_nested(20, &err) == PGD_OK, "%s", pgd_error_get_message(err));
    /* 100 000 levels overflowed the stack inside protobuf-c's unpack; now refused by depth */
    ck_assert_int_eq(load_nested(100000, &err), PGD_ERR_FORMAT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "nested more than 64 deep") &&
                      strstr(pgd_error_get_message(err), "pgd-test-nested-"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph-load");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, shape_without_input);
    tcase_add_test(tc, overflowing_shapes);
    tcase_add_test(tc, saturating_integers);
    tcase_add_test(tc, flatten);
    tcase_add_test(tc, resize_cumsum);
    tcase_add_test(tc, zero_dim_beside_huge);
    tcase_add_test(tc, nesting_guard);
    tcase_add_test(tc, message_cap);
    tcase_add_test(tc, strings_not_utf8);
    tcase_add_test(tc, report_latin1_path);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
