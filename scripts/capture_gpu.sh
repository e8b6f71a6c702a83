#!/usr/bin/env bash
# Make the NVIDIA GPU fixtures of tests/fixtures that the CPU machines cannot, and run
# the Python capture helpers' tests on the GPU, in one short session on a GPU machine.
#
#   scripts/capture_gpu.sh OUTDIR [WHEELDIR]
#
# WHEELDIR (optional) holds the stepscope wheel and pytest's wheels, installed into
# /tmp/site first (a machine that cannot reach PyPI). Writes into OUTDIR:
#   gpu-captures.tar.gz   the log dirs below (TensorBoard layout), to unpack into tests/fixtures
#   gpu-pytest.log        python/tests on the GPU (JAX_PLATFORMS=cuda)
#   gpu-session.log       versions, each capture's last lines
#
# Captures (JAX on one NVIDIA GPU):
#   gpu-sync / gpu-nosync   a device-bound bf16 transformer (about 30 ms of device work a
#                           step), each step waiting for its loss / never waiting: the
#                           twins that show a loop dispatching ahead is timed on the device
#   gpu-nosync-cut          the never-waiting loop stopped right after its last dispatch
#   gpu-cudnn-attention     jax.nn.dot_product_attention(implementation="cudnn"): cuDNN's
#                           fused attention kernels as custom calls
#   gpu-cudnn-attention-nocb  the same with command buffers off (each kernel tagged with
#                           its own instruction: the reference for the one above)
#   gpu-programs            scripts/capture_programs.py: two programs named jit_update,
#                           jit_dot for three sizes, back-to-back launches of one GEMM
#   gpu-nosync-scopes       a loop that never waits, with the guides' scopes and 2 ms of
#                           input loading a step: scopes credited the work they launched
#   gpu-unannotated         no step annotations: steps from the train step's executions
#   gpu-unannotated-nosync  the same in a loop that never waits
#   gpu-PROGRAM(-fixed)     scripts/capture_problems.py's single-problem programs and their
#                           fixed twins (callback, stale-state, recompile, h2d-copy,
#                           op-by-op, sleep as gpu-sleep-step, matmul); gpu-conv (cuDNN
#                           convolutions, 40 steps) and gpu-nosync40 (a never-waiting
#                           loop, 40 steps)
#   gpu-twins.jsonl         each twin pair timed alternately outside the profiler (twin-PROGRAM)
# ONLY="name ..." makes only those captures; ONLY=problems the single-problem ones and
# their timings.
set -u
out=${1:?usage: scripts/capture_gpu.sh OUTDIR [WHEELDIR]}
wheels=${2:-}
mkdir -p "$out"
log="$out/gpu-session.log"
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$wheels"/*.whl || exit 1
    export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda,cpu  # cpu: io_callback places its operands there
{
    date -u
    nvidia-smi -L
    python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
} >"$log" 2>&1

problems=(callback stale-state recompile h2d-copy op-by-op sleep matmul)
if [ "${ONLY:-}" = problems ]; then
    ONLY="gpu-conv gpu-nosync40"
    for p in "${problems[@]}"; do
        name=gpu-${p/#sleep/sleep-step}
        ONLY="$ONLY $name $name-fixed twin-$p"
    done
fi
work=$(mktemp -d)
cap() {  # name, arguments of capture_jax.py (SCRIPT= another capture script)
    local name=$1
    shift
    case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
    echo "== $name: ${SCRIPT:-capture_jax.py} $* ($(date -u +%T))" >>"$log"
    timeout 120 python3 "$here/scripts/${SCRIPT:-capture_jax.py}" --platform gpu --out "$work/$name" "$@" >>"$log" 2>&1 ||
        echo "== $name FAILED ($?)" >>"$log"
    find "$work/$name" -name '*.trace.json.gz' -delete 2>/dev/null
}
big=(--dtype bf16 --layers 4 --d-model 2048 --heads 16 --seq 512 --batch 16 --vocab 8192
     --no-python-tracer --no-memory-profile --seed 0)
cap gpu-sync --steps 8 "${big[@]}"
cap gpu-nosync --steps 8 --no-sync "${big[@]}"
cap gpu-nosync-cut --steps 8 --no-sync --stop-unsynced "${big[@]}"
cudnn=(--steps 5 --dtype bf16 --attention cudnn --layers 2 --d-model 1024 --heads 8 --seq 1024 --batch 8
       --vocab 8192 --no-python-tracer --seed 0)
cap gpu-cudnn-attention "${cudnn[@]}"
XLA_FLAGS=--xla_gpu_enable_command_buffer= cap gpu-cudnn-attention-nocb "${cudnn[@]}"
SCRIPT=capture_programs.py cap gpu-programs --size 8192 --dtype bf16 --repeat 4 --steps 4
mid=(--dtype bf16 --layers 2 --d-model 1024 --heads 8 --seq 256 --batch 16 --vocab 8192
     --no-python-tracer --no-memory-profile --seed 0)
cap gpu-nosync-scopes --steps 8 --no-sync --guide-scopes --input-ms 2 "${mid[@]}"
cap gpu-unannotated --steps 6 --no-step-annotation "${mid[@]}"
cap gpu-unannotated-nosync --steps 6 --no-step-annotation --no-sync "${mid[@]}"
small=(--width 512 --batch 256)  # op-by-op: small ops, so dispatch is the cost
# recompile: no autotuning (each of its compilations would autotune cuBLAS: a 5 MB XSpace)
flags_of() { [ "$1" = recompile ] && echo --xla_gpu_autotune_level=0; }
for p in "${problems[@]}"; do
    extra=()
    [ "$p" = op-by-op ] && extra=("${small[@]}")
    export XLA_FLAGS=$(flags_of "$p")
    name=gpu-${p/#sleep/sleep-step}  # gpu-sleep is another fixture's name on CPU
    SCRIPT=capture_problems.py cap "$name" "$p" "${extra[@]}"
    SCRIPT=capture_problems.py cap "$name-fixed" "$p" --fixed "${extra[@]}"
done
export XLA_FLAGS=
SCRIPT=capture_problems.py cap gpu-conv conv
SCRIPT=capture_problems.py cap gpu-nosync40 nosync
for p in "${problems[@]}"; do  # each pair timed alternately, outside the profiler
    case " ${ONLY:-twin-$p} " in *" twin-$p "*) ;; *) continue ;; esac
    extra=()
    [ "$p" = op-by-op ] && extra=("${small[@]}")
    export XLA_FLAGS=$(flags_of "$p")
    timeout 150 python3 "$here/scripts/capture_problems.py" --platform gpu --time "$p" --steps 8 --rounds 4 \
        "${extra[@]}" >>"$out/gpu-twins.jsonl" 2>>"$log" || echo "== twin-$p FAILED ($?)" >>"$log"
done
export XLA_FLAGS=
tar -C "$work" -czf "$out/gpu-captures.tar.gz" .

if python3 -c 'import stepscope, pytest' 2>/dev/null; then
    (cd "$here/python/tests" && timeout 240 python3 -m pytest -q -p no:cacheprovider \
        test_guides.py test_capture.py test_profiler.py) >"$out/gpu-pytest.log" 2>&1
    echo "pytest exit $?" >>"$log"
fi
tail -n 3 "$out/gpu-pytest.log" >>"$log" 2>/dev/null
cat "$log"
