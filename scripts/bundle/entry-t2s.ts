// Entry of the GPU-host bundle: the `t2s` command line without tsx (everything is bundled).
import { main } from "../../lib/cli/main.js";

process.exitCode = await main(process.argv.slice(2));
