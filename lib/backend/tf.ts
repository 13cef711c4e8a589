/**
 * The one place lib/backend and lib/model import TensorFlow.js from, so every file shares the same engine
 * (and the CPU backend is always registered as the fallback).
 */
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";

export { tf };

// PROD silences the console advice to install tfjs-node that the CPU backend prints on first use
tf.env().set("PROD", true);
