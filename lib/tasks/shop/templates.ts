/** Every shop question template, in a fixed order (the order is part of what a seed reproduces). */
import { BASIC_TEMPLATES } from "./templates-basic.js";
import { JOIN_TEMPLATES } from "./templates-joins.js";
import { MORE_TEMPLATES } from "./templates-more.js";
import { EXTRA_TEMPLATES } from "./templates-extra.js";
import type { Template } from "./template.js";

export const SHOP_TEMPLATES: Template[] = [...BASIC_TEMPLATES, ...JOIN_TEMPLATES, ...MORE_TEMPLATES, ...EXTRA_TEMPLATES];
