//! The `doc` subjects that are not a bench: `common` and `shadow-inode`.

/// What `doc common` prints.
pub const COMMON_DOC: &str = "\
common: what every bench shares.

Why these benches. A latency-sensitive workload (rd-hashd) keeps part
of its memory footprint on the IO device (swap and page cache refaults)
and must be protected from other work on the same machine. The benches
measure how much of that footprint a device can carry (storage: MOF),
how well cgroup2 memory and IO control protect the workload from a
memory hog (protection: isolation, latency impact, work conservation),
and, upstream, how those figures change as io.cost throttles the device
(iocost-qos: MOF and aMOF per vrate; iocost-tune: QoS settings solved
from them).

A run is a series of job specs, KIND[:GROUP1][:GROUP2]..., run in
order and kept in the result file (-r FILE, a journal). A job already
completed with the same kind, id, passive value and properties is not
run again: its summary is printed. Property groups are separated by
':'; two colons give an empty group. The first group holds the job's
own properties; later groups, where a bench takes them, are stages
(protection's scenarios, iocost-qos's QoS settings, iocost-tune's
rules). A property without a value means true.

Properties every bench takes (first group):
  id=NAME       tells apart jobs of the same kind; unique per kind.
  passive=LIST  leave parts of the host as they are: ALL (change
                nothing), all (only hostcritical protection), cpu, mem,
                io, fs, oomd, none (clear), joined with '/'.
  apply, commit benches that produce hashd or iocost parameters hand
                them to later jobs (apply) and, upstream, store them
                in bench.json (commit, which implies apply).

Stages (upstream's names). run: set the host up, check the system
requirements, run the workload and keep a record. study: turn the
record into the result (here done when the job ends, from the record
alone). solve: post-process a result (iocost-tune's fits and solutions,
made again from the result's data by `solve SPEC...`; the other benches
have no solve step). format / summary: print a result in full or in
short; a summary is what run prints after each job. merge: pool the
iocost-tune results of several files and solve them again (`merge
SOURCE...`).

Result header. Every result starts with the kind, id and period; the
system (kernel, CPUs, memory, swap, swappiness, the memory profile's
available/share/target sizes); the IO device (model, firmware, size,
scheduler, whether wbt, io.cost and other IO controllers are on, and
the io.cost model and QoS captured when the job started); the hashd
parameters used; and, when forced, the missed system requirements.

Nested IO latency tables. Every second the IO completion latency
percentiles are taken; the table shows, for each such percentile (a
row: min, p01 ... p99.999, max), its distribution over the run's
seconds (columns p25 ... max), the percentile over the whole run (cum)
and the mean and stdev over the seconds. A row pNN, column pMM reads:
in MM% of the seconds the NN-th percentile latency was at most this.
A device that stalls in short bursts shows high right-hand columns
even when cum looks fine.

Common options: -d/--dir (the scratch directory; its device is the one
tested), --mem-profile (the memory profile; results are comparable
only at the same profile), --force (run without hard requirements),
--test (short CI-sized runs).
";

/// What `doc shadow-inode` prints.
pub const SHADOW_INODE_DOC: &str = "\
shadow-inode: the MemShadowInodeProt requirement.

When the kernel evicts a file page it can leave a small shadow entry in
the file's page cache tree. If the page is read back, the entry shows
the read is a refault: the cgroup lost memory it was using. Refaults
are what memory pressure and memory.low protection are judged from.

Older kernels lost those entries too early. An inode could be reclaimed
while shadow entries hung off it, and an inode whose pages were all
evicted was reclaimed with them, forgetting that its pages had ever
been resident. A workload thrashing through such files looked as if it
had no memory shortage, so memory.low and memory.min protected it much
less than they should.

The fix (protecting inodes that carry shadow entries) went into Linux
5.15 by upstream's account; rackbench counts 5.16 and later as
protected. On older kernels upstream could either detect a tagged
patched kernel or run a test of several minutes, which is not fully
reliable; rackbench does not run that test: `deps` reports the
requirement missed on older kernels and storage and protection record
that they ran without it.
";
