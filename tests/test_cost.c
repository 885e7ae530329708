#define _POSIX_C_SOURCE 200809L
/* Device profiles, POET's cost arithmetic, graph file round trips and the
 * bad inputs every reader must refuse with a clear message. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "poet/poet.h"

static void test_cost_arithmetic(void)
{
    poet_profile m4;
    poet_err err = {0};
    CHECK(poet_profile_find("m4", &m4, &err) == POET_OK);
    /* POET's own figures for the MLP's input layer (3136 bytes) on m4 */
    CHECK(poet_cost_pagein_j(&m4, 3136) == 0.0002601393400425863);
    CHECK(poet_cost_pageout_j(&m4, 3136) == 0.00027037108108108113);
    /* and for its first linear layer (15710 flop) */
    CHECK(poet_cost_compute_j(&m4, 15710) == 2.7085704517868204e-05);
    CHECK(poet_cost_compute_time_s(&m4, 15710) == 0.002466282826874655);
    CHECK(poet_cost_pagein_s(&m4, 0) == m4.pagein_latency_s);
    for (int i = 0; i < poet_profile_count(); i++) CHECK(poet_profile_validate(poet_profile_builtin(i), &err) == 0);
}

static const char GOOD_DEVICE[] =
    "{\"format\":\"poet-device\",\"version\":1,\"name\":\"board\",\"flops_per_s\":1e8,\"flops_per_j\":1e9,"
    "\"pagein_latency_s\":1e-4,\"pagein_bytes_per_s\":1e7,\"pageout_latency_s\":2e-4,"
    "\"pageout_bytes_per_s\":5e6,\"memory_power_w\":0.2}";

static poet_status parse_device(const char *text, poet_err *err)
{
    poet_profile d;
    return poet_profile_parse_json(text, strlen(text), &d, err);
}

static void test_device_files(void)
{
    poet_profile d;
    poet_err err = {0};
    CHECK(poet_profile_parse_json(GOOD_DEVICE, strlen(GOOD_DEVICE), &d, &err) == POET_OK);
    CHECK(strcmp(d.name, "board") == 0 && d.bytes_per_element == 4 && d.pageout_bytes_per_s == 5e6);

    struct {
        const char *text, *expect;
    } bad[] = {
        {"", "invalid JSON"},
        {"{\"format\":\"poet-device\",", "invalid JSON"},
        {"[1,2]", "object"},
        {"{\"format\":\"poet-device\",\"version\":1}", "missing field 'name'"},
        {"{\"format\":\"poet-device\",\"version\":2,\"name\":\"x\"}", "version 2"},
        {"{\"format\":\"other\",\"version\":1}", "format"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.msg[0] = 0;
        CHECK_MSG(parse_device(bad[i].text, &err) != POET_OK, "%s", bad[i].text);
        CHECK_MSG(strstr(err.msg, bad[i].expect) != NULL, "'%s' -> '%s'", bad[i].text, err.msg);
    }
    /* one field at a time made absurd */
    struct {
        const char *from, *to, *expect;
    } edits[] = {
        {"\"flops_per_s\":1e8", "\"flops_per_s\":-1", "flops_per_s"},
        {"\"flops_per_s\":1e8", "\"flops_per_s\":0", "flops_per_s"},
        {"\"flops_per_j\":1e9", "\"flops_per_j\":1e308", "flops_per_j"},
        {"\"pagein_bytes_per_s\":1e7", "\"pagein_bytes_per_s\":\"fast\"", "must be a number"},
        {"\"memory_power_w\":0.2", "\"memory_power_w\":0.2,\"colour\":1", "unknown field 'colour'"},
        {"\"name\":\"board\"", "\"name\":\"\"", "name"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char text[1024];
        const char *at = strstr(GOOD_DEVICE, edits[i].from);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD_DEVICE), GOOD_DEVICE, edits[i].to,
                 at + strlen(edits[i].from));
        err.msg[0] = 0;
        CHECK_MSG(parse_device(text, &err) != POET_OK, "%s", text);
        CHECK_MSG(strstr(err.msg, edits[i].expect) != NULL, "%s -> '%s'", text, err.msg);
    }
    CHECK(poet_profile_find("z80", &d, &err) == POET_ERR_NOT_FOUND && strstr(err.msg, "z80"));
    CHECK(poet_profile_find("/nonexistent/dev.json", &d, &err) == POET_ERR_IO);

    char path[] = "/tmp/poet-test-deviceXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, GOOD_DEVICE, strlen(GOOD_DEVICE)) == (ssize_t)strlen(GOOD_DEVICE));
    close(fd);
    CHECK(poet_profile_find(path, &d, &err) == POET_OK && strcmp(d.name, "board") == 0);
    unlink(path);
}

static bool devices_equal(const poet_profile *a, const poet_profile *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->description, b->description) && a->flops_per_s == b->flops_per_s &&
           a->flops_per_j == b->flops_per_j && a->pagein_latency_s == b->pagein_latency_s &&
           a->pagein_bytes_per_s == b->pagein_bytes_per_s && a->pageout_latency_s == b->pageout_latency_s &&
           a->pageout_bytes_per_s == b->pageout_bytes_per_s && a->memory_power_w == b->memory_power_w &&
           a->power_w == b->power_w && a->bytes_per_element == b->bytes_per_element;
}

static bool instances_equal(const poet_instance *a, const poet_instance *b)
{
    if (a->T != b->T || a->n_edges != b->n_edges || a->batch != b->batch || strcmp(a->model, b->model) ||
        a->parameter_bytes != b->parameter_bytes || a->gradient_bytes != b->gradient_bytes ||
        !devices_equal(&a->device, &b->device))
        return false;
    for (int i = 0; i < a->T; i++) {
        const poet_cnode *x = &a->nodes[i], *y = &b->nodes[i];
        if (strcmp(x->name, y->name) || strcmp(x->op, y->op) || x->is_backward != y->is_backward ||
            x->bytes != y->bytes || x->flops != y->flops || x->time_s != y->time_s || x->compute_j != y->compute_j ||
            x->pagein_j != y->pagein_j || x->pageout_j != y->pageout_j || x->pagein_s != y->pagein_s ||
            x->pageout_s != y->pageout_s)
            return false;
    }
    for (int e = 0; e < a->n_edges; e++)
        if (a->edges[e].src != b->edges[e].src || a->edges[e].dst != b->edges[e].dst) return false;
    return true;
}

static void round_trip(const poet_instance *a)
{
    poet_err err = {0};
    char *text = poet_instance_to_json(a);
    CHECK(text != NULL);
    poet_instance b;
    memset(&b, 0, sizeof b);
    poet_status st = poet_instance_parse_json(text, strlen(text), &b, &err);
    CHECK_MSG(st == POET_OK, "%s", err.msg);
    if (!st) {
        CHECK_MSG(instances_equal(a, &b), "%s round trip differs", a->model);
        char *again = poet_instance_to_json(&b);
        CHECK(again && strcmp(text, again) == 0);
        free(again);
        poet_instance_free(&b);
    }
    free(text);
}

static void test_round_trips(void)
{
    poet_err err = {0};
    for (int i = 0; i < poet_zoo_count(); i++) {
        const char *name = poet_zoo_info(i)->name;
        poet_graph g;
        poet_instance inst;
        CHECK(poet_zoo_build(name, 0, &g, &err) == POET_OK);
        CHECK(poet_instance_from_graph(&g, poet_profile_builtin(i % poet_profile_count()), &inst, &err) == POET_OK);
        round_trip(&inst);
        poet_instance_free(&inst);
        poet_graph_free(&g);
    }
    poet_instance ref;
    CHECK(poet_instance_read_file(POET_TEST_DATA "/reference/resnet18_cifar__m4.json", &ref, &err) == POET_OK);
    round_trip(&ref);
    poet_instance_free(&ref);
}

static const char TINY[] =
    "{\"format\":\"poet-graph\",\"version\":1,\"model\":\"tiny\",\"batch\":1,\"parameter_bytes\":0,"
    "\"gradient_bytes\":0,\"device\":{\"format\":\"poet-device\",\"version\":1,\"name\":\"d\",\"flops_per_s\":1,"
    "\"flops_per_j\":1,\"pagein_latency_s\":0,\"pagein_bytes_per_s\":1,\"pageout_latency_s\":0,"
    "\"pageout_bytes_per_s\":1,\"memory_power_w\":1},\"nodes\":["
    "{\"name\":\"a\",\"op\":\"input\",\"backward\":false,\"bytes\":8,\"flops\":0,\"time_s\":0,\"compute_j\":0,"
    "\"pagein_j\":8,\"pageout_j\":8,\"pagein_s\":8,\"pageout_s\":8},"
    "{\"name\":\"b\",\"op\":\"relu\",\"backward\":false,\"bytes\":8,\"flops\":2,\"time_s\":2,\"compute_j\":2,"
    "\"pagein_j\":8,\"pageout_j\":8,\"pagein_s\":8,\"pageout_s\":8}],\"edges\":[[0,1]]}";

static void test_bad_graph_files(void)
{
    poet_instance inst;
    poet_err err = {0};
    CHECK(poet_instance_parse_json(TINY, strlen(TINY), &inst, &err) == POET_OK);
    poet_instance_stats s;
    CHECK(poet_instance_stats_compute(&inst, &s, &err) == POET_OK);
    CHECK(s.keep_all_peak_bytes == 16 && s.min_budget_bytes == 16 && s.full_memory_energy_j == 2);
    poet_instance_free(&inst);

    struct {
        const char *from, *to, *expect;
    } edits[] = {
        {"[[0,1]]", "[[1,0]]", "topological"},
        {"[[0,1]]", "[[0,1],[1,1]]", "topological"},
        {"[[0,1]]", "[[0,7]]", "outside"},
        {"[[0,1]]", "[[0]]", "pair"},
        {"[[0,1]]", "[[0.5,1]]", "outside"},
        {"\"bytes\":8,\"flops\":2", "\"bytes\":-8,\"flops\":2", "bytes"},
        {"\"bytes\":8,\"flops\":2", "\"bytes\":1e300,\"flops\":2", "bytes"},
        {"\"flops\":2,", "\"flops\":-2,", "flops"},
        {"\"version\":1,\"model\"", "\"version\":9,\"model\"", "version 9"},
        {"\"batch\":1,", "\"batch\":1,\"extra\":true,", "unknown field 'extra'"},
        {"\"nodes\":[", "\"nodes\":{\"x\":1},\"old\":[", "unknown field 'old'"},
        {"\"format\":\"poet-graph\"", "\"format\":\"poet-schedule\"", "format"},
        {"{\"name\":\"b\"", "7,{\"name\":\"b\"", "expected an object"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char text[4096];
        const char *at = strstr(TINY, edits[i].from);
        CHECK_MSG(at != NULL, "%s", edits[i].from);
        if (!at) continue;
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - TINY), TINY, edits[i].to, at + strlen(edits[i].from));
        err.msg[0] = 0;
        CHECK_MSG(poet_instance_parse_json(text, strlen(text), &inst, &err) != POET_OK, "%s", text);
        CHECK_MSG(strstr(err.msg, edits[i].expect) != NULL, "%s -> '%s'", edits[i].to, err.msg);
    }
    /* every truncation of a valid file is refused, none crashes */
    for (size_t n = 0; n < strlen(TINY); n++) {
        CHECK(poet_instance_parse_json(TINY, n, &inst, &err) != POET_OK);
    }
    const char *neither = "{\"nodes\":[],\"edges\":[]}";
    CHECK(poet_instance_parse_json(neither, strlen(neither), &inst, &err) == POET_ERR_INVALID);
    CHECK(strstr(err.msg, "neither") != NULL);
    CHECK(poet_instance_read_file("/nonexistent.json", &inst, &err) == POET_ERR_IO);
    CHECK(poet_instance_read_file("/tmp", &inst, &err) == POET_ERR_IO);
}

int main(void)
{
    test_cost_arithmetic();
    test_device_files();
    test_round_trips();
    test_bad_graph_files();
    return check_report();
}
