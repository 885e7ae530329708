/* poet/onnx.h for a poet built without protobuf-c (POET_WITH_ONNX off):
 * every import and export is refused with one line that says why, so no
 * model is ever made and the accessors are never reached with one. */
#include <string.h>

#include "poet/onnx.h"

static poet_status refused(const char *what, const char *name, poet_err *err)
{
    return poet_fail(err, POET_ERR_UNSUPPORTED,
                     "cannot %s '%s': this poet was built without ONNX support (POET_WITH_ONNX=OFF)", what, name);
}

poet_status poet_onnx_import(const char *path, const poet_onnx_options *o, poet_onnx_model **out, poet_err *err)
{
    (void)o;
    *out = NULL;
    return refused("read", path, err);
}

poet_status poet_onnx_import_bytes(const uint8_t *data, size_t len, const char *name, const poet_onnx_options *o,
                                   poet_onnx_model **out, poet_err *err)
{
    (void)data, (void)len, (void)o;
    *out = NULL;
    return refused("read", name ? name : "(bytes)", err);
}

void poet_onnx_free(poet_onnx_model *m) { (void)m; }

const poet_graph *poet_onnx_graph(const poet_onnx_model *m)
{
    (void)m;
    return NULL;
}

const float *poet_onnx_params(const poet_onnx_model *m, uint64_t *count)
{
    (void)m;
    *count = 0;
    return NULL;
}

const float *poet_onnx_buffers(const poet_onnx_model *m, uint64_t *count)
{
    (void)m;
    *count = 0;
    return NULL;
}

void poet_onnx_summarize(const poet_onnx_model *m, poet_onnx_summary *s)
{
    (void)m;
    memset(s, 0, sizeof *s);
}

poet_status poet_onnx_write(const poet_onnx_model *m, const float *params, const float *buffers, const char *path,
                            poet_err *err)
{
    (void)m, (void)params, (void)buffers;
    return refused("write", path, err);
}
