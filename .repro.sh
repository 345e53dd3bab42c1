#!/bin/bash
# usage: repro.sh app
app=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpiexec --bind-to none -n 1 -x CUDA_VISIBLE_DEVICES=-1 -x PMLIB_NCPU=8 apps/$app/$app --verify --device all : -n 1 -x PMLIB_GPU_SHARE=1 -x PMLIB_NCPU=7 apps/$app/$app --verify --device all > $OUT/$app.log 2>&1 &
pid=$!
for i in $(seq 1 40); do sleep 1; kill -0 $pid 2>/dev/null || break; done
if kill -0 $pid 2>/dev/null; then
  echo "$app HANG"
  for p in $(pgrep -f "apps/$app/.libs/$app\|apps/$app/$app" ); do
    echo "=== pid $p" >> $OUT/$app.stacks
    gdb -p $p -batch -ex "thread apply all bt" >> $OUT/$app.stacks 2>&1
  done
  kill $pid; sleep 1; pkill -9 -f apps/$app
else
  wait $pid; echo "$app rc=$?"
fi
