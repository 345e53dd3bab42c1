#!/bin/sh
# fft2d against NumPy: the transform of random complex64 arrays (fixed
# seed; even, odd and one-row shapes) written by --output equals
# numpy.fft.fft2 of the input within 1e-5 of its largest value, on one
# host and on two, and in place (--output the input, -f). Skips (77)
# without NumPy.
. "${top_srcdir:-.}/tests/apps/numpy-env.sh"
app=${top_builddir:-.}/apps/fft2d/fft2d

for shape in "64 48" "27 35" "1 50" "33 1"; do
  set -- $shape
  name=a$1x$2
  $check fft2d-input "$dir" $name $1 $2
  "$app" --input "$dir/$name.npy" --output "$dir/$name-f.npy" \
    --subtasks 3 --device cpu --no-serial >"$dir/log" ||
    { cat "$dir/log"; fail "fft2d on $name"; }
  $check fft2d "$dir" $name.npy $name-f.npy
  ${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --input "$dir/$name.npy" \
    --output "$dir/$name-f2.npy" --subtasks 4 --device cpu --no-serial \
    >"$dir/log" || { cat "$dir/log"; fail "fft2d on $name, two hosts"; }
  $check fft2d "$dir" $name.npy $name-f2.npy
done
cp "$dir/a27x35.npy" "$dir/in-place.npy"
"$app" --input "$dir/in-place.npy" --output "$dir/in-place.npy" -f \
  --device cpu --no-serial >/dev/null
$check fft2d "$dir" a27x35.npy in-place.npy
echo "PASS"
