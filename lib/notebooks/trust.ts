/**
 * Signing executed notebooks for the user's Jupyter. Jupyter shows a notebook's HTML and JavaScript
 * outputs (every Plotly figure) only when the notebook is trusted: its HMAC-SHA256 signature, keyed by
 * `notebook_secret` in the user's Jupyter data folder, is listed in `nbsignatures.db` there. `jupyter
 * trust` (Debian: jupyter-nbformat) writes that entry; the runner calls it on every notebook it writes,
 * since the outputs are the kit's own.
 */
import { spawnSync } from "node:child_process";
import { defaultPython } from "./kernelspec.js";

/** What signing one notebook did. */
export interface TrustResult {
  signed: boolean;
  /** Why it was not signed (tool missing, tool failed); empty when signed. */
  reason: string;
}

/** The command that signs notebooks (T2S_JUPYTER_TRUST overrides, e.g. for a virtualenv's). */
export function trustCommand(): string {
  return process.env.T2S_JUPYTER_TRUST ?? "jupyter-trust";
}

/** Signs `ipynb` for the user's Jupyter with `jupyter trust`; never throws (an unsigned notebook still runs). */
export function signForJupyter(ipynb: string): TrustResult {
  const r = spawnSync(trustCommand(), [ipynb], { encoding: "utf8", timeout: 60_000 });
  if (r.error) {
    const missing = (r.error as NodeJS.ErrnoException).code === "ENOENT";
    return {
      signed: false,
      reason: missing
        ? `${trustCommand()} not found, so Jupyter will open it "Not Trusted" and hide its figures until you run 'jupyter trust ${ipynb}' (Debian: apt-get install jupyter-nbformat, or npm run setup:system)`
        : `${trustCommand()} failed: ${r.error.message}`,
    };
  }
  if (r.status !== 0) return { signed: false, reason: `${trustCommand()} exited ${r.status}: ${(r.stderr || r.stdout).trim().split("\n").pop() ?? ""}` };
  return { signed: true, reason: "" };
}

/**
 * Whether the user's Jupyter trusts `ipynb` (its signature is in nbsignatures.db), asked of nbformat's
 * own NotebookNotary; null when Python's nbformat is not installed.
 */
export function trustedByJupyter(ipynb: string): boolean | null {
  const script = "import sys, nbformat\nfrom nbformat.sign import NotebookNotary\nnb = nbformat.read(sys.argv[1], nbformat.NO_CONVERT)\nprint('trusted' if NotebookNotary().check_signature(nb) else 'untrusted')";
  const r = spawnSync(defaultPython(), ["-c", script, ipynb], { encoding: "utf8", timeout: 60_000 });
  if (r.error || /No module named/.test(r.stderr ?? "")) return null;
  return r.stdout.trim() === "trusted";
}
