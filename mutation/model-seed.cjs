// The protocol model's random runs from one seed during a mutation run (MUTATE_MODEL_SEED, set by mutation/run.ts),
// so that a mutant meets the same runs each time and a rerun reports what the last one did.
if (process.env.MUTATE_MODEL_SEED)
  require('fast-check').configureGlobal({ seed: Number(process.env.MUTATE_MODEL_SEED) });
