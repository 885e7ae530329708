#define _POSIX_C_SOURCE 200809L
/* poet simulate: a saved schedule validated and its figures re-derived. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "saved.h"
static const char SIMULATE_HELP[] =
    "usage: poet simulate FILE [--instance FILE | (--model NAME | --onnx FILE) --device DEV [--batch N]\n"
    "                     [--train SPEC]] [--json]\n"
    "Validates a saved schedule (JSON or binary) and re-derives every figure\n"
    "that poet plan printed: energy, peak RAM, placed arena, time with and\n"
    "without paging. The graph comes from the file or from the options.\n";

int cmd_simulate(int argc, char **argv)
{
    graph_src src = {0};
    const char *file = NULL;
    bool json = false, help = false;
    if (argc > 0 && argv[0][0] != '-') file = argv[0], argc--, argv++;
    opt opts[] = {GRAPH_SRC_OPTS(src), {"--json", false, NULL, &json}, {NULL, false, NULL, NULL}};
    int rc = parse_opts("simulate", argc, argv, opts, &help);
    if (rc || help) return help ? (fputs(SIMULATE_HELP, stdout), 0) : rc;
    if (!file) return usage_error("simulate", "give the schedule file first", NULL);
    loaded l;
    if ((rc = load_schedule("simulate", file, &src, true, &l))) return rc;
    poet_problem p;
    poet_sim sim;
    if (!(rc = check_and_simulate(&l, &p, &sim, NULL))) {
        report rep = {&p, l.s.planner, "valid", NULL, &sim, p.full_memory_energy_j, -1, -1, true, 0, NULL, NULL, NULL, NULL};
        rc = print_report(&rep, json);
        poet_problem_free(&p);
    }
    loaded_free(&l);
    return rc;
}
