/* What to change when a budget lies below a model's floor. */
#ifndef POET_TOOLS_ADVICE_H
#define POET_TOOLS_ADVICE_H

#include "cli.h"

/* A model that did not fit: where it came from, what was asked. */
typedef struct fix_question {
    const char *model, *onnx, *train; /* train NULL: all */
    int batch;
    const poet_profile *dev;
    uint64_t budget;  /* the arena budget asked for, when !whole_ram */
    bool whole_ram;   /* --budget ram: the whole RAM must fit dev's */
    device_layout layout;
    uint64_t fixed_ram_bytes;
} fix_question;

/* Prints the nearest fix on stderr: the largest smaller batch and the first
 * lighter --train spec whose floor fits, or that none does. */
void suggest_fix(const fix_question *q);
/* Where dev's RAM goes when the arena it leaves (--budget ram) lies below the floor. */
void explain_ram(const poet_profile *dev, const ram_use *r, uint64_t arena, uint64_t floor);

#endif
