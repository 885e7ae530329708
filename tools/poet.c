#define _POSIX_C_SOURCE 200809L
/* poet: the command-line tool, a thin layer over the library; one file per
 * command (cmd_*.c). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* ---- dispatch ---- */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"models", cmd_models, "list the built-in models"},
    {"devices", cmd_devices, "list the built-in device profiles"},
    {"graph", cmd_graph, "build or read a training graph and report its memory and energy"},
    {"planners", cmd_planners, "list the planners"},
    {"plan", cmd_plan, "plan a training iteration under RAM and runtime budgets"},
    {"simulate", cmd_simulate, "validate a saved schedule and re-derive its figures"},
    {"show", cmd_show, "draw a saved schedule (SVG, PNG)"},
    {"encode", cmd_encode, "write a schedule in the compact binary form for devices"},
    {"decode", cmd_decode, "write a binary schedule as JSON"},
    {"sweep", cmd_sweep, "plan one model over a range of budgets and draw the energy-memory frontier"},
    {"fit", cmd_fit, "say which batches and --train specs train within a device's RAM"},
    {"train", cmd_train, "plan a schedule for a budget and train a model under it on real data"},
    {"import", cmd_import, "read an ONNX model with its weights and report its training graph"},
    {"export", cmd_export, "write the device image a microcontroller trains from"},
    {"emulate", cmd_emulate, "train on an emulated Cortex-M4F board (QEMU) and compare with the host"},
    {"update", cmd_update, "keep deployed devices current by sending a few percent of the weights (partial updating)"},
};

static void print_help(FILE *f)
{
    fprintf(f,
            "poet %s: plan memory-limited training on small devices (POET, ICML 2022)\n"
            "usage: poet COMMAND [OPTIONS]   (poet COMMAND --help for its options)\n\n",
            POET_VERSION);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "poet: missing command (see poet --help)\n");
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("poet %s\n", POET_VERSION);
        return 0;
    }
    /* a write past `ulimit -f` fails with EFBIG, which poet reports, instead of killing poet without a word */
    signal(SIGXFSZ, SIG_IGN);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "poet: unknown command '%s' (see poet --help)\n", argv[1]);
    return EXIT_USAGE;
}
