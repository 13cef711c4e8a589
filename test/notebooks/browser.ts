/** Opens an HTML report (or a notebook in a Jupyter server) in the system Chromium and counts what Plotly drew. */
import { chromium } from "playwright-core";
import { HANG_GUARD_MS, SYSTEM_CHROMIUM } from "../helpers.js";

export interface PageFacts {
  figures: number;
  bars: number;
  errors: string[];
}

/** Loads the file, lets its scripts run, and returns the number of plotted figures and bars plus page errors and network attempts. */
export async function inspectReport(file: string): Promise<PageFacts> {
  const { figures, bars, errors } = await inspectPage(`file://${file}`, /^(file|data|about):/);
  return { figures, bars, errors };
}

/**
 * Loads `url` and returns what Plotly drew, the page errors, requests to URLs `allowed` does not match,
 * and, on a classic Jupyter Notebook page, whether the notebook opened trusted (null elsewhere).
 */
export async function inspectPage(url: string, allowed: RegExp): Promise<PageFacts & { trusted: boolean | null }> {
  const browser = await chromium.launch({
    timeout: HANG_GUARD_MS,
    executablePath: SYSTEM_CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("request", (r) => {
      if (!allowed.test(r.url())) errors.push(`network request: ${r.url()}`);
    });
    await page.goto(url, { timeout: HANG_GUARD_MS });
    // page code as strings: the test tsconfig has no DOM types. Wait until every figure div has drawn (a
    // loaded machine draws them one by one); one that never draws is counted out after the hang guard.
    const allDrawn = '[...document.querySelectorAll(".t2s-plotly")].every((d) => d.querySelector(".main-svg")) && document.querySelectorAll(".t2s-plotly").length > 0';
    await page.waitForFunction(allDrawn, undefined, { timeout: HANG_GUARD_MS }).catch(() => undefined);
    const facts = (await page.evaluate(
      '({ figures: document.querySelectorAll(".t2s-plotly.js-plotly-plot").length, bars: document.querySelectorAll(".t2s-plotly .point").length,' +
        ' trusted: window.IPython && window.IPython.notebook ? window.IPython.notebook.trusted : null })',
    )) as { figures: number; bars: number; trusted: boolean | null };
    return { ...facts, errors };
  } finally {
    await browser.close();
  }
}
