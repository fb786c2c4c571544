# Sourced by .ci/run and scripts/test.sh: `step NAME` announces a step and times the one before it; at exit, a
# table of where the time went (the last lines of a CI log say it).
STEPS_STARTED=$SECONDS
STEP_NAME=""
STEP_STARTED=$SECONDS
STEP_TIMES=()

step_close() {
  if [ -n "$STEP_NAME" ]; then
    STEP_TIMES+=("$(printf '%5d s  %s' "$((SECONDS - STEP_STARTED))" "$STEP_NAME")")
  fi
  STEP_NAME=""
}

step() {
  step_close
  STEP_NAME="$1"
  STEP_STARTED=$SECONDS
  echo "==> $1"
}

steps_report() {
  local status=$?
  step_close
  echo "--- time per step ($1, exit $status) ---"
  printf '%s\n' "${STEP_TIMES[@]}"
  printf '%5d s  total\n' "$((SECONDS - STEPS_STARTED))"
}
