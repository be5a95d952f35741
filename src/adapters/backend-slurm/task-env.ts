/** The variable the launcher sets to each task's rank. */
export const RANK_ENV = "SLURM_PROCID";

/** The variable that names the node a task runs on (in JOB_ENV: a session's worker sees it). */
export const NODE_ENV = "SLURMD_NODENAME";

/**
 * What each task of a multi-task BATCH sees of the launcher's environment, by name (the
 * sandbox's `env -i` drops everything else, the login environment included): the rank and
 * layout variables MPI launchers and scripts read, and PMI's wire-up (PMI-1/2: the
 * descriptor srun passes and its rank/size; PMIx: the server's address and namespace).
 * SLURM_CONF and the scheduler's own sockets are not here: a task talks to its PMI
 * server, never to the controller. docs/operations.md lists these for admins.
 */
export const TASK_ENV: readonly string[] = [
  "SLURM_JOB_ID",
  "SLURM_JOBID",
  "SLURM_STEP_ID",
  "SLURM_PROCID",
  "SLURM_LOCALID",
  "SLURM_NODEID",
  "SLURM_NTASKS",
  "SLURM_NPROCS",
  "SLURM_NNODES",
  "SLURM_JOB_NUM_NODES",
  "SLURM_JOB_NODELIST",
  "SLURM_NODELIST",
  "SLURM_STEP_NODELIST",
  "SLURM_STEP_NUM_NODES",
  "SLURM_STEP_NUM_TASKS",
  "SLURM_STEP_TASKS_PER_NODE",
  "SLURM_TASKS_PER_NODE",
  "SLURM_CPUS_PER_TASK",
  "SLURM_CPUS_ON_NODE",
  "SLURM_JOB_CPUS_PER_NODE",
  "SLURM_TOPOLOGY_ADDR",
  "SLURMD_NODENAME",
  "SLURM_MPI_TYPE",
  "PMI_FD",
  "PMI_RANK",
  "PMI_SIZE",
  "PMI_JOBID",
  "PMI_SPAWNED",
  "PMI_TIME",
  "PMIX_RANK",
  "PMIX_NAMESPACE",
  "PMIX_SERVER_URI2",
  "PMIX_SERVER_URI21",
  "PMIX_SERVER_URI3",
  "PMIX_SERVER_URI4",
  "PMIX_SERVER_URI41",
  "PMIX_SERVER_TMPDIR",
  "PMIX_SYSTEM_TMPDIR",
  "PMIX_SECURITY_MODE",
  "PMIX_GDS_MODULE",
  "PMIX_PTL_MODULE",
  "PMIX_BFROP_BUFFER_TYPE",
  "PMIX_HOSTNAME",
  "PMIX_VERSION",
];

/**
 * What a job's one process (a single-task BATCH, a session's worker and so its kernel) sees
 * of the scheduler's environment, by name: which job it is (SLURM_JOB_ID: a scientist's
 * `scontrol show job`, `sstat` and their own logs use it), where it runs and what it was
 * given there (nodes, CPUs, memory, GPUs: CUDA_VISIBLE_DEVICES is how CUDA and every
 * framework above it pick the job's devices; without it a GPU session saw all or none).
 * Before, the sandbox's `env -i` dropped them all for a session, and SLURM_JOB_ID was
 * missing from its kernel. The controller's address and SLURM_CONF are not here.
 */
export const JOB_ENV: readonly string[] = [
  "SLURM_JOB_ID",
  "SLURM_JOBID",
  "SLURM_CLUSTER_NAME",
  "SLURM_JOB_PARTITION",
  "SLURM_JOB_ACCOUNT",
  "SLURM_JOB_QOS",
  "SLURM_JOB_NODELIST",
  "SLURM_NODELIST",
  "SLURM_JOB_NUM_NODES",
  "SLURM_NNODES",
  "SLURM_NODEID",
  "SLURMD_NODENAME",
  "SLURM_CPUS_ON_NODE",
  "SLURM_JOB_CPUS_PER_NODE",
  "SLURM_CPUS_PER_TASK",
  "SLURM_MEM_PER_NODE",
  "SLURM_MEM_PER_CPU",
  "SLURM_GPUS_ON_NODE",
  "SLURM_JOB_GPUS",
  "SLURM_STEP_GPUS",
  "CUDA_VISIBLE_DEVICES",
  "ROCR_VISIBLE_DEVICES",
  "GPU_DEVICE_ORDINAL",
];
