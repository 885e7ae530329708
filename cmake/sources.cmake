# poet's modules, from the bottom up (docs/ARCHITECTURE.md), as lists of
# sources relative to POET_ROOT: the top-level build and the firmware's
# both read them, so a file moves in one place.
set(POET_BASE_SOURCES src/base/status.c src/base/mathf.c src/base/hash.c)
set(POET_OPS_SOURCES src/ops/ops.c)
set(POET_DEVICE_SOURCES src/device/image_check.c src/device/device.c src/device/optimizer.c src/device/step.c src/device/kernels.c src/device/conv.c src/device/conv_plane.c src/device/gemm.c
    src/device/norm.c src/device/linear.c src/device/pool.c src/device/elementwise.c src/device/movement.c
    src/device/softmax.c src/device/patch.c src/device/store.c src/device/sparse.c src/device/alq_product.c)
# the device library: what a board links, with base's stdio-free poet_fail
set(POET_DEVICE_LIBRARY_SOURCES ${POET_BASE_SOURCES} ${POET_OPS_SOURCES} ${POET_DEVICE_SOURCES} src/base/fail.c)

set(POET_HOST_SOURCES src/host/fail_stdio.c src/host/clock.c src/host/apart.c src/host/fileio.c src/host/json.c
    src/host/storage.c)
set(POET_GRAPH_SOURCES src/graph/graph.c src/graph/zoo.c src/graph/trainable.c)
set(POET_COST_SOURCES src/cost/profile.c src/cost/instance.c src/cost/instance_io.c src/cost/calibrate.c)
set(POET_SCHEDULE_SOURCES src/schedule/problem.c src/schedule/schedule.c src/schedule/stages.c
    src/schedule/simulate.c src/schedule/validate.c src/schedule/program.c src/schedule/placement.c src/schedule/io.c)
# CBC, GLPK and protobuf-c are options (CMakeLists.txt); each has a stand-in
# that answers without it
if(POET_WITH_CBC)
  set(POET_CBC_SOURCE src/plan/cbc.c)
else()
  set(POET_CBC_SOURCE src/plan/cbc_absent.c)
endif()
if(POET_WITH_GLPK)
  set(POET_GLPK_SOURCE src/plan/glpk_mip.c)
else()
  set(POET_GLPK_SOURCE src/plan/glpk_absent.c)
endif()
set(POET_PLAN_SOURCES src/plan/common.c src/plan/progress.c src/plan/greedy.c src/plan/lp.c ${POET_CBC_SOURCE}
    ${POET_GLPK_SOURCE} src/plan/formulation.c src/plan/milp.c src/plan/cover.c src/plan/windows.c src/plan/fates.c
    src/plan/fast.c src/plan/planners.c src/plan/sweep.c)
set(POET_RUNTIME_SOURCES src/runtime/image_write.c src/runtime/patch_write.c src/runtime/dma.c src/runtime/engine.c
    src/runtime/checkpoint.c src/runtime/data.c src/runtime/data_file.c src/runtime/numpy.c src/runtime/train.c)
set(POET_LEARN_SOURCES src/learn/dpu.c src/learn/dress.c src/learn/alq_fit.c src/learn/quantize.c)
if(POET_WITH_ONNX)
  set(POET_ONNX_SOURCES src/onnx/import.c src/onnx/values.c src/onnx/map_window.c src/onnx/map_linear.c
      src/onnx/map_elementwise.c src/onnx/map_norm.c src/onnx/map_shape.c src/onnx/fold.c src/onnx/write.c)
else()
  set(POET_ONNX_SOURCES src/onnx/absent.c)
endif()

# the host library: every module, base's poet_fail replaced by the host's
set(POET_LIBRARY_SOURCES ${POET_BASE_SOURCES} ${POET_OPS_SOURCES} ${POET_DEVICE_SOURCES} ${POET_HOST_SOURCES}
    ${POET_GRAPH_SOURCES} ${POET_COST_SOURCES} ${POET_SCHEDULE_SOURCES} ${POET_PLAN_SOURCES}
    ${POET_RUNTIME_SOURCES} ${POET_LEARN_SOURCES} ${POET_ONNX_SOURCES})
