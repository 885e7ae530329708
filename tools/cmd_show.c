#define _POSIX_C_SOURCE 200809L
/* poet show: a saved schedule drawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saved.h"
#include "show.h"
static const char SHOW_HELP[] =
    "usage: poet show FILE [--svg OUT] [--png OUT]\n"
    "                 [--instance FILE | (--model NAME | --onnx FILE) --device DEV [--batch N] [--train SPEC]]\n"
    "Draws a saved schedule: memory in use against the budget over the\n"
    "iteration, and the schedule matrices (computed, in RAM, on storage, paged\n"
    "in or out at each stage). Writes OUT.svg (default: FILE.svg); --png also\n"
    "converts it when rsvg-convert or ImageMagick's convert is installed.\n";

static int write_svg(const char *path, const poet_problem *p, const poet_schedule *s, const poet_sim *sim,
                     const poet_mem_trace *trace)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return lib_error(&(poet_err){POET_ERR_NOMEM, "out of memory drawing"});
    show_svg(mem, p, s, sim, trace);
    fclose(mem);
    poet_err err = {0};
    int rc = poet_write_file_atomic(path, buf, len, &err) ? lib_error(&err) : 0;
    free(buf);
    return rc;
}

/* PNG through whichever converter is installed, read from its standard
 * output and written under the output rule like every other file. */
static int convert_png(const char *svg, const char *png)
{
    static const char *const how[] = {
        "command -v rsvg-convert >/dev/null && rsvg-convert '%s' 2>/dev/null",
        "command -v convert >/dev/null && convert '%s' png:- 2>/dev/null",
    };
    char cmd[4200];
    if (strchr(svg, '\'')) return usage_error("show", "paths with quotes are not supported", NULL);
    for (size_t k = 0; k < sizeof how / sizeof *how; k++) {
        snprintf(cmd, sizeof cmd, how[k], svg);
        FILE *f = popen(cmd, "r");
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = f ? open_memstream(&buf, &len) : NULL;
        char chunk[65536];
        for (size_t n; mem && (n = fread(chunk, 1, sizeof chunk, f)) > 0;) fwrite(chunk, 1, n, mem);
        if (mem) fclose(mem);
        bool made = f && pclose(f) == 0 && len > 0;
        poet_err err = {0};
        int rc = made ? (poet_write_file_atomic(png, buf, len, &err) ? lib_error(&err) : 0) : -1;
        free(buf);
        if (rc >= 0) return rc;
    }
    fprintf(stderr, "poet: cannot write '%s': no SVG converter (apt-get install librsvg2-bin)\n", png);
    return 1;
}

int cmd_show(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL, *svg = NULL,
               *png = NULL;
    bool help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), OUTPUT_OPT("--svg", svg),
                  OUTPUT_OPT("--png", png), {NULL, false, NULL, NULL}};
    int rc = parse_opts("show", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(SHOW_HELP, stdout), 0) : rc;
    if (!file) return usage_error("show", "give the schedule file first", NULL);
    char default_svg[4096];
    if (!svg) {
        snprintf(default_svg, sizeof default_svg, "%s.svg", file);
        svg = default_svg;
    }
    loaded l;
    if ((rc = load_schedule("show", file, &src, true, &l))) return rc;
    poet_problem p;
    poet_sim sim;
    poet_mem_trace trace = {0};
    if (!(rc = check_and_simulate(&l, &p, &sim, &trace))) {
        rc = write_svg(svg, &p, &l.s, &sim, &trace);
        if (!rc && png) rc = convert_png(svg, png);
        if (!rc) printf("wrote %s%s%s\n", svg, png ? " and " : "", png ? png : "");
        poet_problem_free(&p);
    }
    poet_mem_trace_free(&trace);
    loaded_free(&l);
    return rc;
}
