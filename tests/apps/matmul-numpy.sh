#!/bin/sh
# matmul against NumPy: C written by --output for random float32 A and B
# (fixed seed; square, M x K x N with every size odd and different, a row
# times a column) is A @ B in float64 within the float32 bound
# 1.01 K 2^-24 (|A||B|) at every element, on one host and on two. Skips
# (77) without NumPy.
. "${top_srcdir:-.}/tests/apps/numpy-env.sh"
app=${top_builddir:-.}/apps/matmul/matmul

for shape in "64 64 64" "37 53 29" "1 200 1" "45 3 61"; do
  set -- $shape
  name=m$1k$2n$3
  $check matmul-input "$dir" $name $1 $2 $3
  "$app" --a "$dir/$name-a.npy" --b "$dir/$name-b.npy" \
    --output "$dir/$name-c.npy" --rows 8 --cols 16 --device cpu \
    --no-serial >"$dir/log" || { cat "$dir/log"; fail "matmul on $name"; }
  $check matmul "$dir" $name-a.npy $name-b.npy $name-c.npy
  ${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --a "$dir/$name-a.npy" \
    --b "$dir/$name-b.npy" --output "$dir/$name-c2.npy" --rows 5 \
    --device cpu --no-serial >"$dir/log" ||
    { cat "$dir/log"; fail "matmul on $name, two hosts"; }
  $check matmul "$dir" $name-a.npy $name-b.npy $name-c2.npy
done
echo "PASS"
