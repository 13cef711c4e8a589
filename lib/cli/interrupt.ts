/**
 * Ctrl-C during a long command (benchmark, train, tasks augment). What such a command writes is already
 * safe when it is stopped at any moment (whole-row appends, checkpoints and task files by rename), so the
 * stop itself changes nothing; what the user lacks is being told so. On SIGINT the command prints one
 * line on stderr, what was kept and the exact command that continues, and exits 130 (128 + SIGINT), as a
 * process stopped by Ctrl-C does.
 */

/** The exit code of a command stopped by Ctrl-C: 128 + SIGINT's number, as shells report it. */
export const INTERRUPTED_EXIT = 130;

/** `arg` as a POSIX shell reads it back: as is when plain, else single-quoted. */
function shellWord(arg: string): string {
  return /^[A-Za-z0-9_\-.,:/=@+%]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The command being run, as a line to paste into a shell: `t2s` and its arguments (`extra` appended when absent). */
export function commandLine(extra: string[] = [], args: string[] = process.argv.slice(2)): string {
  const all = [...args, ...extra.filter((x) => !args.includes(x))];
  return ["t2s", ...all].map(shellWord).join(" ");
}

/**
 * Until the returned function is called, Ctrl-C prints `interrupted: <kept()>` on stderr (one line) and
 * exits 130. `kept` runs in the signal handler: it must be synchronous and say what is on disk now.
 */
export function onInterrupt(kept: () => string): () => void {
  const handler = () => {
    let what: string;
    try {
      what = kept();
    } catch (e) {
      what = `what was kept could not be read (${(e as Error).message}); run the same command again to continue: ${commandLine()}`;
    }
    // on a terminal the progress line is rewritten in place: end it before the message
    process.stderr.write(`${process.stderr.isTTY ? "\n" : ""}interrupted: ${what}\n`);
    process.exit(INTERRUPTED_EXIT);
  };
  process.once("SIGINT", handler);
  return () => {
    process.off("SIGINT", handler);
  };
}
