# tools/mps.sh — CUDA MPS for the scripts whose ranks share a GPU; source it, then mps_start,
# mps_stop, mps_restart, mps_on. Two processes on one GPU without MPS are time-sliced (about 150 us
# a message), which is not how users run them, so every figure with ranks sharing a GPU is taken
# under MPS. The daemon's pipe and log directories are exported for the clients (the ranks):
#   CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log (unless already set).
# bench_pingpong and ferry-measure record whether MPS served them (bench/mps.hpp asks the driver).
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/mps}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/mps-log}

# The control daemon runs and answers.
mps_on() {
  [ -S "$CUDA_MPS_PIPE_DIRECTORY/control" ] &&
    echo get_server_list | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
}

mps_start() {
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    echo "MPS: nvidia-cuda-mps-control not found: NOT on"
    return 1
  fi
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  mps_on || nvidia-cuda-mps-control -d
  for _ in $(seq 50); do
    mps_on && break
    sleep 0.2
  done
  if ! mps_on; then
    echo "MPS: the control daemon does not answer: NOT on"
    tail -5 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null
    return 1
  fi
  echo "MPS: on (CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY)"
}

mps_stop() {
  mps_on || return 0
  echo quit | timeout 30 nvidia-cuda-mps-control
  for _ in $(seq 50); do
    [ -S "$CUDA_MPS_PIPE_DIRECTORY/control" ] || break
    sleep 0.2
  done
  echo "MPS: off"
}

# After a suite failed: a fatal fault in one client ends every client on that GPU, and the server
# may refuse new ones until it restarts.
mps_restart() {
  mps_stop
  mps_start
}
