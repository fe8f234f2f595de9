#!/bin/sh
# A stand-in for llama-bench on a virtual device. It parses the flags llama-bench parses
# (-m, -t, -ub, -b, -p, -n, --device, -o, comma lists) and prints genuine llama-bench JSONL
# records (the field names of tools/llama-bench/llama-bench.cpp, test::get_fields()), one per
# (model, batch, ubatch, threads, test), with tokens/s derived from the arguments and the
# session count, times a factor that cycles 1.0, 1.1, 1.5 over successive runs (a counter file
# in the working directory) so that repeated runs differ and a median is not a mean.
models= threads=6 ubatches=512 batches=2048 n_prompt=512 n_gen=128 devices=auto output=md
while [ $# -gt 0 ]; do
  case $1 in
    -m|--model) models=$2; shift ;;
    -t|--threads) threads=$2; shift ;;
    -ub|--ubatch-size) ubatches=$2; shift ;;
    -b|--batch-size) batches=$2; shift ;;
    -p|--n-prompt) n_prompt=$2; shift ;;
    -n|--n-gen) n_gen=$2; shift ;;
    -dev|--device) devices=$2; shift ;;
    -o|--output) output=$2; shift ;;
    -r|--repetitions|-fa|--flash-attn|-ngl|--n-gpu-layers|--poll|--mmap|-mmp|--cpu-mask|-C|--cpu-strict) shift ;;
    *) echo "error: invalid parameter for argument: $1" >&2; exit 1 ;;
  esac
  shift
done
ndev=1
if [ -n "${GGML_HEXAGON_DEVICES:-}" ]; then
  ndev=$(printf '%s\n' "$GGML_HEXAGON_DEVICES" | awk -F, '/^[0-9]+$/ {print $1; exit} {print NF}')
elif [ -n "${GGML_HEXAGON_NDEV:-}" ]; then
  ndev=$GGML_HEXAGON_NDEV
fi
count=0
[ -f .fake-bench-count ] && count=$(cat .fake-bench-count)
echo $((count + 1)) > .fake-bench-count
echo "ggml-hex: allocating new session: HTP0 (fake, $ndev sessions)" >&2
old_ifs=$IFS
IFS=,
for model in $models; do
  if [ ! -f "$model" ]; then
    echo "error: failed to load model '$model'" >&2
    exit 1
  fi
  for b in $batches; do for ub in $ubatches; do for t in $threads; do
    for test in pp tg; do
      awk -v model="$model" -v b="$b" -v ub="$ub" -v t="$t" -v ndev="$ndev" -v test="$test" \
          -v np="$n_prompt" -v ng="$n_gen" -v devices="$devices" -v count="$count" -v output="$output" 'BEGIN {
        split("1.0 1.1 1.5", f, " "); factor = f[(count % 3) + 1]
        if (test == "pp") { p = np; g = 0; ts = (100 * ndev + ub / 10 + t) * factor }
        else { p = 0; g = ng; ts = (10 * ndev + t) * factor }
        if (p + g == 0) exit
        ns = int(1e9 * (p + g) / ts)
        if (output != "jsonl") { printf "| %s | %s | pp%d tg%d | %.2f |\n", model, devices, p, g, ts; exit }
        printf "{\"build_commit\": \"fake000\", \"build_number\": 1, \"cpu_info\": \"virtual\", \"gpu_info\": \"\", \"backends\": \"HTP\", "
        printf "\"model_filename\": \"%s\", \"model_type\": \"llama 1B Q4_0\", \"model_size\": 1000000, \"model_n_params\": 1000000, ", model
        printf "\"n_batch\": %d, \"n_ubatch\": %d, \"n_threads\": %d, \"cpu_mask\": \"0x0\", \"cpu_strict\": false, \"poll\": 50, ", b, ub, t
        printf "\"type_k\": \"f16\", \"type_v\": \"f16\", \"n_gpu_layers\": 99, \"n_cpu_moe\": 0, \"split_mode\": \"layer\", \"main_gpu\": 0, "
        printf "\"no_kv_offload\": false, \"flash_attn\": 1, \"devices\": \"%s\", \"tensor_split\": \"0.00\", \"tensor_buft_overrides\": \"none\", ", devices
        printf "\"load_mode\": \"none\", \"lazy_mode\": \"auto\", \"embeddings\": false, \"no_op_offload\": 0, \"no_host\": false, \"repack\": true, "
        printf "\"fit_target\": 0, \"fit_min_ctx\": 4096, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": 0, \"test_time\": \"2026-10-01T00:00:00Z\", ", p, g
        printf "\"avg_ns\": %d, \"stddev_ns\": 0, \"avg_ts\": %.6f, \"stddev_ts\": 0.000000, \"samples_ns\": [ %d ],\"samples_ts\": [ %.6f ]}\n", ns, ts, ns, ts
      }'
    done
  done; done; done
done
IFS=$old_ifs
