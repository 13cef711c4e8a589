/**
 * Registering the tslab kernel with Jupyter, through tslab's own `tslab install` (which needs Python with
 * jupyter_client). Only people who want Jupyter, nbclient or nbconvert need this; `t2s notebooks run`
 * talks to the kernel itself.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";

export interface InstallKernelOptions {
  /** Install under DIR/share/jupyter/kernels (use JUPYTER_PATH=DIR/share/jupyter to find it). */
  prefix?: string;
  /** Install to the per-user kernel folder. */
  user?: boolean;
  /** The Python with jupyter_client (default /usr/bin/python3, else python3 on PATH). */
  python?: string;
  /** The command the kernelspec runs (default: the kit's launcher, which runs tslab at the kit root). */
  binary?: string;
}

export interface InstallKernelResult {
  kernels: string[];
  python: string;
  binary: string;
  location: string;
}

/** The Python used for Jupyter: Debian's when present (a pyenv python3 first on PATH often lacks Jupyter). */
export function defaultPython(): string {
  return existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

/** The launcher script a kernelspec points at. */
export function kernelLauncher(): string {
  return kitPath("lib", "notebooks", "kernel-launcher.cjs");
}

function pythonHasJupyter(python: string): { ok: boolean; why: string } {
  const r = spawnSync(python, ["-c", "import jupyter_client, IPython"], { encoding: "utf8" });
  if (r.error) return { ok: false, why: `cannot run ${python}: ${r.error.message}` };
  return { ok: r.status === 0, why: (r.stderr || "").trim().split("\n").pop() ?? "" };
}

/** Registers the tslab (TypeScript) and jslab kernelspecs; throws T2sError with what to install when Jupyter is missing. */
export function installKernel(opts: InstallKernelOptions = {}): InstallKernelResult {
  const python = opts.python ?? defaultPython();
  const check = pythonHasJupyter(python);
  if (!check.ok) {
    throw new T2sError(
      "jupyter_missing",
      `${python} cannot import jupyter_client and IPython (${check.why}). ` +
        "On Debian/Ubuntu install them with: sudo apt-get install jupyter-client python3-ipykernel " +
        "(add jupyter-notebook python3-nbclient jupyter-nbconvert to run notebooks with Jupyter), " +
        "or pass --python with an interpreter that has them.",
    );
  }
  const binary = resolve(opts.binary ?? kernelLauncher());
  if (!existsSync(binary)) throw new T2sError("kernel_binary", `kernel command ${binary} does not exist`);
  const args = [kitPath("node_modules", "tslab", "bin", "tslab"), "install", `--python=${python}`, `--binary=${binary}`];
  if (opts.prefix) args.push(`--prefix=${resolve(opts.prefix)}`);
  if (opts.user) args.push("--user");
  const r = spawnSync(process.execPath, args, { encoding: "utf8" });
  if (r.status !== 0) {
    throw new T2sError("kernel_install", `tslab install failed (exit ${r.status}): ${(r.stderr || r.stdout || "").trim()}`);
  }
  const location = opts.prefix ? join(resolve(opts.prefix), "share", "jupyter", "kernels", "tslab") : findKernelDir(python);
  return { kernels: ["tslab", "jslab"], python, binary, location };
}

function findKernelDir(python: string): string {
  const r = spawnSync(python, ["-c", "from jupyter_client.kernelspec import KernelSpecManager as K; print(K().find_kernel_specs().get('tslab', ''))"], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : "";
}
