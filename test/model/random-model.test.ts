// randomModel's copyLayers: the layers after the first hold the first layer's values in buffers of their own
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf } from "../../lib/backend/tf.js";
import { storage } from "../../lib/model/packed.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";

for (const weightsDtype of ["fp32", "bf16"] as const) {
  test(`copyLayers (${weightsDtype}): every layer holds layer 0's values in its own tensors; the untied head copies the embedding`, async () => {
    await tf.setBackend("cpu");
    const c = tinyConfig({ numLayers: 3 });
    const m = randomModel(c, { seed: 3, weightsDtype, copyLayers: true });
    const plain = randomModel(c, { seed: 3, weightsDtype });
    const w = m.weights;
    for (const i of [1, 2]) {
      for (const f of ["q", "k", "v", "o", "gate", "up", "down"] as const) {
        const a = storage(w.layers[0][f].weight);
        const b = storage(w.layers[i][f].weight);
        assert.notEqual(a.dataId, b.dataId, `layer ${i} ${f} shares layer 0's buffer`);
        assert.deepEqual(b.dataSync(), a.dataSync(), `layer ${i} ${f}`);
      }
    }
    assert.deepEqual(storage(w.lmHead!).dataSync(), storage(w.embed).dataSync());
    // layer 0 is the same draw as a model without copies: only the later layers differ
    assert.deepEqual(storage(w.layers[0].q.weight).dataSync(), storage(plain.weights.layers[0].q.weight).dataSync());
    assert.notDeepEqual(storage(plain.weights.layers[1].q.weight).dataSync(), storage(plain.weights.layers[0].q.weight).dataSync());
    m.dispose();
    plain.dispose();
  });
}
