// Entry of the GPU-host bundle: the `t2s` command line without tsx (everything is bundled).
import { main } from "../../lib/cli/main.js";
// loadPolicy finds policy kinds by a computed module path, which a bundle cannot follow: register them here
import "../../lib/policy/tfjs.js";

process.exitCode = await main(process.argv.slice(2));
