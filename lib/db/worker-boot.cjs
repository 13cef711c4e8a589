// Entry of the pool's worker processes: runs worker.ts through tsx's in-thread CommonJS hook, which
// starts about twice as fast as tsx's ESM loader (no loader thread), so a killed worker is replaced sooner.
// The parent passes the hook's path because this folder's package scope is ESM and cannot resolve it here.
// T2S_WORKER_MODULE names another TypeScript entry to run the same way (the fast graders of `t2s grade`).
require(process.env.T2S_TSX_CJS || "tsx/cjs");
require(process.env.T2S_WORKER_MODULE || "./worker.ts");
