# Sourced by the launch scripts: glibc malloc on transparent huge pages for the processes they start
# (XLA:CPU's per-step temporaries otherwise fault in 4 KiB at a time; see hr1_jax/utils/host_env.py).
# HR1_HUGEPAGES=0 leaves malloc as it is; a GLIBC_TUNABLES that already sets the tunable is kept.
if [ "${HR1_HUGEPAGES:-1}" != "0" ] && [[ "${GLIBC_TUNABLES:-}" != *glibc.malloc.hugetlb=* ]]; then
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
fi
