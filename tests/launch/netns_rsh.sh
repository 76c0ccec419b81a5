#!/bin/sh
# Open MPI's rsh agent for a job over network namespaces (netns_mpi_test, README "Across nodes"):
# `netns_rsh.sh HOST COMMAND...` runs COMMAND in the namespace that holds address HOST, with its own
# hostname (the namespace's name, in a UTS namespace of its own) so Open MPI sees another node.
host=$1
shift
for ns in $(ip netns list | cut -d' ' -f1); do
  if ip -n "$ns" -o -4 addr show | grep -q " inet $host/"; then
    exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $ns && $*"
  fi
done
echo "netns_rsh.sh: no network namespace holds address $host" >&2
exit 255
