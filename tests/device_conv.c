/* The convolution kernels on the emulated Cortex-M4F (poet-conv-check.elf,
 * run by tests/device.sh): random grouped, strided, dilated, unevenly
 * padded convolutions, every other one 3x3 at stride 1 with four filters a
 * group, at three workspace sizes, each bit for bit against
 * the plain loops of conv_cases.h, as test_device checks them on the host.
 * The board's kernels take paths the host's do not (the padded plane's
 * four-by-four tiles, the Cortex-M4's instruction blocks). The seed is the
 * first argument (default 20261207); prints one line and exits 0 when
 * every case holds. */
#include "conv_cases.h"
#include "semihost.h"

/* The largest case random_conv draws with these limits: 2 images, 15
 * channels and filters (3 groups of 5; up to 5 filters a group, so that
 * the four-filter tiles run), 9 x 9 inputs, 13 x 13 outputs. */
enum { MAX_X = 2 * 15 * 9 * 9, MAX_Y = 2 * 15 * 13 * 13, MAX_W = 15 * 5 * 25 + 15, MAX_WORK = 4096 };

static float x[MAX_X], w[MAX_W], dy[MAX_Y], y[MAX_Y], yr[MAX_Y], dx[MAX_X], dxr[MAX_X], gw[MAX_W], gwr[MAX_W];
static float work[MAX_WORK];

static char line[320];
static int used;

static void put(const char *s)
{
    while (*s && used < (int)sizeof line - 2) line[used++] = *s++;
    line[used] = 0;
}

static void put_num(uint64_t v)
{
    char d[24];
    int k = 0;
    do d[k++] = (char)('0' + v % 10), v /= 10;
    while (v);
    while (k && used < (int)sizeof line - 2) line[used++] = d[--k];
    line[used] = 0;
}

static uint64_t seed_of_cmdline(void)
{
    char cmd[128];
    if (sh_cmdline(cmd, sizeof cmd)) return 20261207;
    char *arg = cmd;
    while (*arg && *arg != ' ') arg++;
    while (*arg == ' ') arg++;
    uint64_t s = 0;
    for (; *arg >= '0' && *arg <= '9'; arg++) s = s * 10 + (uint64_t)(*arg - '0');
    return *cmd && s ? s : 20261207;
}

int main(void)
{
    uint64_t seed = seed_of_cmdline();
    rng = seed;
    conv_buffers b = {x, w, dy, y, yr, dx, dxr, gw, gwr, work};
    int cases = 150, bad = 0, runs = 0;
    const char *first = NULL;
    conv_case first_case = {0};
    for (int t = 0; t < cases; t++) {
        conv_case c = t % 2 ? common_conv((conv_limits){2, 5, 9}) : random_conv((conv_limits){2, 5, 9});
        knode nodes[3];
        conv_nodes(&c, nodes);
        conv_case_fill(&c, nodes, &b);
        size_t kk = (size_t)(c.C / c.G * c.KH * c.KW), sizes[] = {kk, 7 * kk, MAX_WORK};
        for (int k = 0; k < 3; k++) {
            if (sizes[k] > MAX_WORK) continue;
            const char *what = conv_case_differs(&c, nodes, &b, sizes[k]);
            runs++;
            if (what && !bad++) first = what, first_case = c;
        }
    }
    put("conv-check: "), put_num((uint64_t)cases), put(" random convolutions, "), put_num((uint64_t)runs);
    put(" runs, "), put_num((uint64_t)bad), put(bad ? " differ from the plain loops (first: " : " differ from the plain loops");
    if (first) {
        const conv_case *f = &first_case;
        const int shape[] = {f->N, f->C, f->H, f->W, f->F, f->G, f->KH, f->KW, f->SH, f->SW, f->DH, f->DW, f->PT, f->PL, f->PB, f->PR};
        put(first), put(" of N C H W F G KH KW SH SW DH DW PT PL PB PR");
        for (int i = 0; i < 16; i++) put(" "), put_num((uint64_t)shape[i]);
        put(")");
    }
    put(" (seed "), put_num(seed), put(")\n");
    sh_puts(line);
    return bad ? 1 : 0;
}
