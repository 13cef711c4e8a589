/** The signature of the sources under `libDir`: one "path size mtime" line per file, sorted. */
export function sourceSignature(libDir: string): string;
/** True when `distDir` holds a build of exactly the sources under `libDir`. */
export function distIsFresh(libDir: string, distDir: string): boolean;
