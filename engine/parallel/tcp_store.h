// The rendezvous store: a tiny TCP key-value server (run by the launcher, or by rank 0 when the job
// was started by torchrun/mpirun/srun) and its client, which implements Gloo's rendezvous::Store
// so that gloo::rendezvous::Context::connectFullMesh can exchange addresses through it.
//
// Wire format (all integers little-endian u32): request = op (u8), key length, key bytes,
// value length, value bytes. Ops: set (reply: u8 1), set_noreply (no reply), get (reply: u8
// found, value length, value bytes; found = 0 when the key does not exist yet). Waiting for a key
// is done by the client polling `get` until its deadline, so the server never holds requests.
#pragma once
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/unique_fd.h"

namespace tessera {

// ------------------------------------------------------------------------------------------------
// Server: one thread, poll() over the listening socket and its clients.

class TcpStoreServer {
  public:
    // Binds `bind_addr` ("0.0.0.0" for every interface) on `port` (0 = an ephemeral port) and
    // starts serving. Throws Error naming the address if it cannot bind.
    TcpStoreServer(const std::string& bind_addr, int port);
    ~TcpStoreServer();  // stops the thread, closes every socket
    TcpStoreServer(const TcpStoreServer&) = delete;
    TcpStoreServer& operator=(const TcpStoreServer&) = delete;

    int port() const { return port_; }
    void clear();  // forget every key (the launcher does this between attempts)
    size_t size() const;

  private:
    void serve();

    UniqueFd listen_fd_;
    UniquePipe wake_pipe_;  // written by the destructor to end serve()
    int port_ = 0;
    mutable std::mutex mu_;
    std::map<std::string, std::vector<char>> kv_;
    std::thread thread_;
};

// ------------------------------------------------------------------------------------------------
// Client. Thread-compatible (one caller at a time); give each thread its own client.

class TcpStore : public gloo::rendezvous::Store {
  public:
    // Connects to host:port, retrying until `timeout` (the server may start after the client).
    // Throws Error naming host:port when it cannot connect in time.
    TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout);
    ~TcpStore() override;

    void set(const std::string& key, const std::vector<char>& data) override;
    // Blocks until the key exists (up to the store's timeout).
    std::vector<char> get(const std::string& key) override;
    void wait(const std::vector<std::string>& keys) override;
    void wait(const std::vector<std::string>& keys,
              const std::chrono::milliseconds& timeout) override;

    // Fire-and-forget set (progress markers on the hot path: no round trip).
    void set_noreply(const std::string& key, const std::string& value);
    // One non-blocking lookup: false when the key does not exist.
    bool try_get(const std::string& key, std::vector<char>* out);

    const std::string& address() const { return addr_; }  // "host:port", for messages

  private:
    void request(uint8_t op, const std::string& key, const char* val, size_t n);

    UniqueFd fd_;
    std::string addr_;
    std::chrono::milliseconds timeout_;
};

}  // namespace tessera
