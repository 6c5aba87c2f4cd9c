#!/usr/bin/env python3
"""What a conference participant's renegotiation costs the node: CPU per offer of a large room
(a 100-section Chromium offer, about 500 KB), sent again and again to a release build.

  cargo build --release -p sfu
  python3 benches/scripts/renegotiation.py target/release/sfu [OFFERS [SECTIONS]]
  BUMP=1 python3 ...   # each offer with the next o= version, as a browser writes it

The node runs with the offer rate limit off; its CPU time is read from /proc."""
import http.client, subprocess, sys, time, os, re
HERE=os.path.dirname(os.path.abspath(__file__))
FIX=os.path.join(HERE,'../../sfu/src/node/sdp/fixtures/chromium156_viewer_recvonly.sdp')
AV1=os.path.join(HERE,'../../sfu/src/node/sdp/fixtures/publisher_av1.sdp')
def crlf(s): return s.replace('\r\n','\n').replace('\n','\r\n')
def large(videos):
    t=crlf(open(FIX).read()); a=t.index('m=audio'); v=t.index('m=video')
    head=t[:a]; first=t[a:v]; rep=t[v:]
    off=head+first; mids=['0']
    for n in range(videos):
        off+=rep.replace('a=mid:1\r\n','a=mid:x%d\r\n'%n); mids.append('x%d'%n)
    return off.replace('a=group:BUNDLE 0 1','a=group:BUNDLE '+' '.join(mids))
binary=sys.argv[1]; n=int(sys.argv[2]) if len(sys.argv)>2 else 200
import tempfile
cfg=os.path.join(tempfile.mkdtemp(),'node.toml'); open(cfg,'w').write('[limits]\noffers_per_second = 0\n')
p=subprocess.Popen([binary,'serve','--http','127.0.0.1:0','--udp','127.0.0.1:0','--log','warn','--config',cfg],stdout=subprocess.PIPE)
line=p.stdout.readline().decode(); addr=re.search(r'http://([^/]+)/',line).group(1)
host,port=addr.split(':')
def req(m,path,body,ct='application/sdp'):
    c=http.client.HTTPConnection(host,int(port)); c.request(m,path,body=body.encode(),headers={'Content-Type':ct}); r=c.getresponse(); b=r.read(); c.close(); return r.status,dict(r.getheaders()),b
offer=large(int(sys.argv[3]) if len(sys.argv)>3 else 100)
print('offer bytes',len(offer))
# a publisher so sections carry something
req('POST','/rooms/r?name=pub',crlf(open(AV1).read()))
st,h,b=req('POST','/rooms/r?name=big',offer); assert st==201,(st,b[:200]); loc=h['location']
def cpu():
    f=open('/proc/%d/stat'%p.pid).read().split(')')[1].split(); return (int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')
c0=cpu(); t0=time.time()
import re as _re
bump=os.environ.get('BUMP')=='1'
for i in range(n):
    o=_re.sub(r'(o=\S+ \S+ )(\d+)',lambda m:m.group(1)+str(int(m.group(2))+i+1),offer,count=1) if bump else offer
    st,h,b=req('PATCH',loc,o); assert st==200,(st,b[:200])
c1=cpu(); t1=time.time()
print('%d offers: %.2f ms CPU each, %.2f ms wall each'%(n,(c1-c0)*1000/n,(t1-t0)*1000/n))
p.kill()
