# Sourced by the launch scripts: glibc malloc tunables for the processes they start (see
# hr1_jax/utils/host_env.py, whose TUNABLES these are): transparent huge pages, and large blocks kept
# in the heap after free, so XLA:CPU's per-step temporaries are not mapped and faulted in anew each
# step (hr1 stages then also run XLA:CPU computations on the calling thread).
# HR1_JOB_MALLOC=0 leaves malloc as it is; a tunable GLIBC_TUNABLES already sets is kept as it is.
if [ "${HR1_JOB_MALLOC:-1}" != "0" ]; then
  for _hr1_tunable in glibc.malloc.hugetlb=1 glibc.malloc.mmap_max=0 glibc.malloc.trim_threshold=1099511627776; do
    if [[ ":${GLIBC_TUNABLES:-}" != *":${_hr1_tunable%%=*}="* ]]; then
      export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}$_hr1_tunable"
    fi
  done
  unset _hr1_tunable
fi
