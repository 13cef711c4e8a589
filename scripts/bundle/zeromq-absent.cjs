// Stands in for the zeromq native module in the GPU-host bundle, which carries no Jupyter pieces:
// the notebook runner is the only user, and it says plainly that it is unavailable there.
class Unavailable {
  constructor() {
    throw new Error("notebooks cannot run from the GPU-host bundle (no zeromq/tslab there); run them from a full install");
  }
}
module.exports = { Dealer: Unavailable, Request: Unavailable, Subscriber: Unavailable };
